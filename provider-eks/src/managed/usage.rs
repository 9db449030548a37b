//! ProviderConfigUsages, as crossplane-runtime's providers keep them: every managed resource records the
//! ProviderConfig (or ClusterProviderConfig) it uses in a `ProviderConfigUsage` named by its uid, in its
//! namespace, owned by it. The config's controller (`crate::provider_config`) holds the config's deletion while
//! any usage names it. The usage goes when the resource's finalizer does (and, were that step lost, with its
//! owner through the garbage collector).

use std::collections::HashSet;
use std::sync::Mutex;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use modelplane_eks_api::{ProviderConfigReference, ProviderConfigUsage};
use serde_json::json;

use super::resource::Managed;

/// The label every usage carries with its config's name (crossplane-runtime's), so a config lists its users
/// with a label selector instead of reading every usage.
pub const CONFIG_LABEL: &str = "crossplane.io/provider-config";

/// Writes each resource's usage once per process and config: steady reconciles make no Kubernetes write.
#[derive(Default)]
pub struct Tracker {
    written: Mutex<HashSet<String>>,
}

fn key(uid: &str, config: &ProviderConfigReference) -> String {
    format!("{uid}/{}/{}", config.kind, config.name)
}

impl Tracker {
    /// Makes sure the usage of `mr` names its current config (applied, so a changed reference is followed).
    pub async fn track<M: Managed>(&self, client: &kube::Client, mr: &M) -> Result<(), kube::Error> {
        let Some(uid) = mr.uid() else {
            return Ok(());
        };
        let config = mr.provider_config_ref();
        let key = key(&uid, config);
        if self
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        let namespace = mr.namespace().unwrap_or_default();
        let usage = json!({
            "apiVersion": ProviderConfigUsage::api_version(&()),
            "kind": ProviderConfigUsage::kind(&()),
            "metadata": {
                "name": uid,
                "namespace": namespace,
                "labels": {CONFIG_LABEL: config.name},
                "ownerReferences": [{
                    "apiVersion": M::api_version(&()),
                    "kind": M::kind(&()),
                    "name": mr.name_any(),
                    "uid": uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "providerConfigRef": config,
                "resourceRef": {
                    "apiVersion": M::api_version(&()),
                    "kind": M::kind(&()),
                    "name": mr.name_any(),
                    "uid": uid,
                },
            },
        });
        let usage: ProviderConfigUsage = serde_json::from_value(usage).map_err(kube::Error::SerdeError)?;
        let api = Api::<ProviderConfigUsage>::namespaced(client.clone(), &namespace);
        // Create, and only when one exists already (a restart) read it, and rewrite it if its config changed:
        // a steady fleet's restart costs one write per resource, not two.
        match api.create(&PostParams::default(), &usage).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let current = api.get(&uid).await?;
                if current.spec != usage.spec || current.labels().get(CONFIG_LABEL) != Some(&config.name) {
                    let patch =
                        json!({"metadata": {"labels": {CONFIG_LABEL: config.name}}, "spec": usage.spec});
                    api.patch(&uid, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
            Err(e) => return Err(e),
        }
        self.written.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
        Ok(())
    }

    /// Deletes the usage of `mr`: it no longer needs its config.
    pub async fn untrack<M: Managed>(&self, client: &kube::Client, mr: &M) -> Result<(), kube::Error> {
        let Some(uid) = mr.uid() else {
            return Ok(());
        };
        let api = Api::<ProviderConfigUsage>::namespaced(client.clone(), &mr.namespace().unwrap_or_default());
        match api.delete(&uid, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
        let prefix = format!("{uid}/");
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k| !k.starts_with(&prefix));
        Ok(())
    }
}
