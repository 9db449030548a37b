//! What a world needs in the API server before the provider starts, and the cluster-wide state one test must
//! not inherit from the one before: the provider's CRDs, Crossplane's ManagedResourceDefinition CRD (vendored
//! under `tests/crds/crossplane/`), an MRD (Inactive) for each of our managed kinds, and the managed resources
//! earlier tests left.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionStatus,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use modelplane_eks_api::{Addon, Cluster, FileSystem, Network, NodePool, PodIdentityAssociation, Role};
use modelplane_provider_eks::activation::ManagedKind;
use serde_json::json;

use super::repo_root;

/// The provider's kinds that `World::start_without_managed_crds` leaves out.
pub const MANAGED_CRDS: [&str; 2] = ["clusters.eks.m.modelplane.ai", "nodepools.eks.m.modelplane.ai"];

const GONE_WITHIN: Duration = Duration::from_secs(60);

pub fn mrd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "apiextensions.crossplane.io",
            "v1alpha1",
            "ManagedResourceDefinition",
        ),
        "managedresourcedefinitions",
    )
}

/// Crossplane's MRD CRD, as vendored.
pub fn mrd_crd() -> CustomResourceDefinition {
    let path =
        repo_root().join("tests/crds/crossplane/apiextensions.crossplane.io_managedresourcedefinitions.yaml");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Our MRD for `crd`, as Crossplane's package manager writes it: the CRD's spec plus the activation state
/// (the real schema requires group, names, scope and versions).
pub fn mrd_for(crd: &CustomResourceDefinition, state: &str) -> DynamicObject {
    let mut mrd = DynamicObject::new(&crd.name_any(), &mrd_resource());
    let mut spec = serde_json::to_value(&crd.spec).unwrap();
    spec["state"] = state.into();
    mrd.data = json!({ "spec": spec });
    mrd
}

pub fn managed_crds() -> Vec<CustomResourceDefinition> {
    modelplane_provider_eks::crds::all()
        .into_iter()
        .filter(|c| MANAGED_CRDS.contains(&c.name_any().as_str()))
        .collect()
}

/// The CRD of every kind the provider manages (each has an MRD).
pub fn every_managed_kind_crd() -> Vec<CustomResourceDefinition> {
    modelplane_provider_eks::crds::all()
        .into_iter()
        .filter(|c| ManagedKind::ALL.iter().any(|k| k.mrd_name() == c.name_any()))
        .collect()
}

/// Seeds what a stand-in (kmock) cannot decide itself: every CRD with the status the API server would write.
pub async fn stand_in_crds(kube: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for mut crd in modelplane_provider_eks::crds::all() {
        crd.status = Some(established_status());
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    for crd in every_managed_kind_crd() {
        mrds(kube)
            .create(&PostParams::default(), &mrd_for(&crd, "Inactive"))
            .await
            .unwrap();
    }
}

fn established_status() -> CustomResourceDefinitionStatus {
    serde_json::from_value(json!({
        "conditions": [{ "type": "Established", "status": "True", "reason": "InitialNamesAccepted" }],
        "acceptedNames": { "kind": "", "plural": "" },
    }))
    .unwrap()
}

pub fn mrds(kube: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(kube.clone(), &mrd_resource())
}

/// On the real API server, under `Exclusive`: the CRDs installed and served, no managed resource of an earlier
/// test left (their providers are gone, and their ProviderConfigs point at proxies that are gone or, worse,
/// reused ports), and the MRDs of all our kinds freshly Inactive: an MRD cannot go back from Active (its CEL rule), so it is
/// deleted and created again. `with_managed_crds: false` then removes the Cluster and NodePool CRDs, as on a
/// cluster where Crossplane has not activated them yet.
pub async fn reset_real(kube: &kube::Client, with_managed_crds: bool) {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    let mut wanted = modelplane_provider_eks::crds::all();
    wanted.push(mrd_crd());
    for crd in &wanted {
        match crds.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("cannot create CRD {}: {e}", crd.name_any()),
        }
    }
    for crd in &wanted {
        wait_established(&crds, &crd.name_any()).await;
    }
    remove_all::<Cluster>(kube).await;
    remove_all::<NodePool>(kube).await;
    remove_all::<Network>(kube).await;
    remove_all::<Role>(kube).await;
    remove_all::<FileSystem>(kube).await;
    remove_all::<Addon>(kube).await;
    remove_all::<PodIdentityAssociation>(kube).await;
    for crd in every_managed_kind_crd() {
        let name = crd.name_any();
        let _ = mrds(kube).delete(&name, &DeleteParams::default()).await;
        wait_gone(&mrds(kube), &name).await;
        mrds(kube)
            .create(&PostParams::default(), &mrd_for(&crd, "Inactive"))
            .await
            .unwrap_or_else(|e| panic!("cannot create the ManagedResourceDefinition {name}: {e}"));
    }
    if !with_managed_crds {
        for name in MANAGED_CRDS {
            let _ = crds.delete(name, &DeleteParams::default()).await;
            wait_gone(&crds, name).await;
        }
    }
}

/// Creates the Cluster and NodePool CRDs (as Crossplane does once their MRDs are Active); the real API server
/// establishes them itself.
pub async fn install_managed_crds(kube: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for crd in managed_crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    for name in MANAGED_CRDS {
        wait_established(&crds, name).await;
    }
}

/// Every object of kind `K` in every namespace, its finalizers dropped so the delete goes through.
async fn remove_all<K>(kube: &kube::Client)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let all: Api<K> = Api::all(kube.clone());
    for object in all.list(&Default::default()).await.unwrap() {
        let api: Api<K> = Api::namespaced(kube.clone(), &object.namespace().unwrap_or_default());
        let name = object.name_any();
        let unfinalize = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
        let _ = api.patch(&name, &PatchParams::default(), &unfinalize).await;
        let _ = api.delete(&name, &DeleteParams::default()).await;
        wait_gone(&api, &name).await;
    }
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + GONE_WITHIN;
    while api.get_opt(name).await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "{name} was not deleted within {GONE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, name: &str) {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let crd = crds.get(name).await.unwrap();
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "CRD {name} not Established within {GONE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
