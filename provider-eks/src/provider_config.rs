//! ProviderConfigs and ClusterProviderConfigs in use cannot be deleted (crossplane-runtime's behaviour): each
//! carries the `in-use.crossplane.io` finalizer, which comes off only once no ProviderConfigUsage names the
//! config. A usage that goes away wakes its config, so a held delete finishes as soon as the last user is gone.
//! Nothing is listed while a config is not being deleted: a steady config costs no API call.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use modelplane_eks_api::{ClusterProviderConfig, ProviderConfig, ProviderConfigUsage};
use serde_json::json;

use crate::managed::usage::CONFIG_LABEL;

pub const IN_USE_FINALIZER: &str = "in-use.crossplane.io";
/// How soon a held delete looks again if no usage event wakes it first.
const HELD_RECHECK: Duration = Duration::from_secs(30);

struct Context {
    client: kube::Client,
}

/// How many usages name the config `kind`/`name`: in `namespace` for a ProviderConfig, anywhere for a
/// ClusterProviderConfig.
async fn users(
    client: &kube::Client,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Result<usize, kube::Error> {
    let api: Api<ProviderConfigUsage> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let listed = api
        .list(&ListParams::default().labels(&format!("{CONFIG_LABEL}={name}")))
        .await?;
    Ok(listed
        .items
        .iter()
        .filter(|u| u.spec.provider_config_ref.kind == kind && u.spec.provider_config_ref.name == name)
        .count())
}

async fn set_finalizers<K>(api: &Api<K>, config: &K, finalizers: Vec<String>) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    // The resourceVersion read: a concurrent change makes this fail with 409 rather than drop a finalizer.
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": config.resource_version()}});
    api.patch(&config.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Adds the finalizer to a live config; releases a deleted one once nothing uses it.
async fn hold<K>(client: &kube::Client, api: Api<K>, config: Arc<K>) -> Result<Action, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let held = config.finalizers().iter().any(|f| f == IN_USE_FINALIZER);
    if config.meta().deletion_timestamp.is_none() {
        if !held {
            let mut finalizers = config.finalizers().to_vec();
            finalizers.push(IN_USE_FINALIZER.into());
            set_finalizers(&api, config.as_ref(), finalizers).await?;
        }
        return Ok(Action::await_change());
    }
    if !held {
        return Ok(Action::await_change());
    }
    let kind = K::kind(&());
    let name = config.name_any();
    let using = users(client, &kind, &name, config.meta().namespace.as_deref()).await?;
    if using > 0 {
        tracing::info!(%kind, %name, users = using, "deletion held: the config is still in use");
        return Ok(Action::requeue(HELD_RECHECK));
    }
    let finalizers = config
        .finalizers()
        .iter()
        .filter(|f| *f != IN_USE_FINALIZER)
        .cloned()
        .collect();
    set_finalizers(&api, config.as_ref(), finalizers).await?;
    tracing::info!(%kind, %name, "released: no managed resource uses the config any more");
    Ok(Action::await_change())
}

fn retry<K>(_: Arc<K>, err: &kube::Error, _: Arc<Context>) -> Action {
    tracing::warn!(error = %err, "provider config reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The configs a usage event concerns: the one it names.
fn named_by<K: Resource<DynamicType = ()>>(usage: &ProviderConfigUsage) -> Option<ObjectRef<K>> {
    let config = &usage.spec.provider_config_ref;
    if config.kind != K::kind(&()) {
        return None;
    }
    let reference = ObjectRef::new(&config.name);
    Some(match usage.namespace() {
        Some(ns) if config.kind == ProviderConfig::kind(&()) => reference.within(&ns),
        _ => reference,
    })
}

/// Runs the ProviderConfig and ClusterProviderConfig controllers until the process ends.
pub async fn run(client: kube::Client) {
    let context = Arc::new(Context {
        client: client.clone(),
    });
    let usages = || Api::<ProviderConfigUsage>::all(client.clone());
    let namespaced = Controller::new(
        Api::<ProviderConfig>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(usages(), watcher::Config::default(), |u| {
        named_by::<ProviderConfig>(&u)
    })
    .run(
        |config: Arc<ProviderConfig>, ctx: Arc<Context>| async move {
            let api = Api::namespaced(ctx.client.clone(), &config.namespace().unwrap_or_default());
            hold(&ctx.client, api, config).await
        },
        retry,
        context.clone(),
    )
    .for_each(|_| async {});
    let cluster = Controller::new(
        Api::<ClusterProviderConfig>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(usages(), watcher::Config::default(), |u| {
        named_by::<ClusterProviderConfig>(&u)
    })
    .run(
        |config: Arc<ClusterProviderConfig>, ctx: Arc<Context>| async move {
            hold(&ctx.client, Api::all(ctx.client.clone()), config).await
        },
        retry,
        context,
    )
    .for_each(|_| async {});
    futures::join!(namespaced, cluster);
}
