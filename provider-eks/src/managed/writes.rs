//! The reconciler's writes to Kubernetes: annotations, finalizer, status and the connection secret.
//! Metadata writes carry the resourceVersion read, so a concurrent change makes them fail with 409 instead of
//! overwriting it (the create-pending mark depends on that).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::annotations::FINALIZER;
use super::external::ConnectionDetails;
use super::resource::Managed;

fn api<M: Managed>(client: &kube::Client, mr: &M) -> Api<M> {
    Api::namespaced(client.clone(), &mr.namespace().unwrap_or_default())
}

/// The object as the API server has it now (None once it is gone).
pub async fn fetch<M: Managed>(client: &kube::Client, mr: &M) -> Result<Option<M>, kube::Error> {
    api(client, mr).get_opt(&mr.name_any()).await
}

async fn patch_metadata<M: Managed>(
    client: &kube::Client,
    mr: &M,
    metadata: serde_json::Value,
) -> Result<M, kube::Error> {
    let mut metadata = metadata;
    if let (Some(obj), Some(rv)) = (metadata.as_object_mut(), mr.resource_version()) {
        obj.insert("resourceVersion".into(), rv.into());
    }
    api(client, mr)
        .patch(
            &mr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": metadata })),
        )
        .await
}

pub async fn set_annotations<M: Managed>(
    client: &kube::Client,
    mr: &M,
    annotations: &[(&str, String)],
) -> Result<M, kube::Error> {
    let map: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone().into()))
        .collect();
    patch_metadata(client, mr, json!({ "annotations": map })).await
}

pub async fn add_finalizer<M: Managed>(client: &kube::Client, mr: &M) -> Result<M, kube::Error> {
    if mr.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(mr.clone());
    }
    let mut finalizers = mr.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    patch_metadata(client, mr, json!({ "finalizers": finalizers })).await
}

pub async fn remove_finalizer<M: Managed>(client: &kube::Client, mr: &M) -> Result<(), kube::Error> {
    if !mr.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let finalizers: Vec<&String> = mr.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    match patch_metadata(client, mr, json!({ "finalizers": finalizers })).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Merges a `spec.forProvider` patch (late initialization).
pub async fn patch_for_provider<M: Managed>(
    client: &kube::Client,
    mr: &M,
    patch: &serde_json::Value,
) -> Result<M, kube::Error> {
    let body = json!({
        "metadata": { "resourceVersion": mr.resource_version() },
        "spec": { "forProvider": patch },
    });
    api(client, mr)
        .patch(&mr.name_any(), &PatchParams::default(), &Patch::Merge(body))
        .await
}

/// Writes `status` (conditions, atProvider, observedGeneration) unless it would change nothing: a no-op write
/// would still wake the controller's watch and cost one more AWS Observe.
pub async fn write_status<M: Managed>(
    client: &kube::Client,
    mr: &M,
    status: serde_json::Value,
) -> Result<(), kube::Error> {
    let current = serde_json::to_value(mr).unwrap_or_default();
    let unchanged = status
        .as_object()
        .is_some_and(|fields| fields.iter().all(|(k, v)| current["status"].get(k) == Some(v)));
    if unchanged {
        return Ok(());
    }
    api(client, mr)
        .patch_status(
            &mr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map(|_| ())
}

/// Writes the connection secret, owned by the managed resource; skips the write when the data is unchanged.
pub async fn publish<M: Managed>(
    client: &kube::Client,
    mr: &M,
    details: &ConnectionDetails,
) -> Result<(), kube::Error> {
    let Some(target) = mr.connection_secret() else {
        return Ok(());
    };
    if details.is_empty() {
        return Ok(());
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &mr.namespace().unwrap_or_default());
    let data: BTreeMap<String, ByteString> = details
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
        .collect();
    match secrets.get_opt(&target.name).await? {
        Some(existing) if existing.data.as_ref() == Some(&data) => Ok(()),
        Some(_) => {
            let patch = Patch::Merge(json!({ "data": data }));
            secrets
                .patch(&target.name, &PatchParams::default(), &patch)
                .await
                .map(|_| ())
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(target.name.clone()),
                    namespace: mr.namespace(),
                    owner_references: mr.controller_owner_ref(&()).map(|o| vec![o]),
                    ..Default::default()
                },
                type_: Some("connection.crossplane.io/v1alpha1".into()),
                data: Some(data),
                ..Default::default()
            };
            secrets.create(&PostParams::default(), &secret).await.map(|_| ())
        }
    }
}

pub async fn unpublish<M: Managed>(client: &kube::Client, mr: &M) -> Result<(), kube::Error> {
    let Some(target) = mr.connection_secret() else {
        return Ok(());
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &mr.namespace().unwrap_or_default());
    match secrets.delete(&target.name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

pub fn generation<M: Resource>(mr: &M) -> Option<i64> {
    mr.meta().generation
}
