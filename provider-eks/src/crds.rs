//! The CustomResourceDefinitions of provider-eks, generated from the Rust types. `package/provider-eks/crds/`
//! holds them as committed files (one per CRD, named `<group>_<plural>.yaml` as Crossplane packages do).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use modelplane_eks_api::{
    Addon, Cluster, ClusterProviderConfig, FileSystem, Network, NodePool, PodIdentityAssociation,
    ProviderConfig, ProviderConfigUsage, Role,
};

pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        Cluster::crd(),
        NodePool::crd(),
        Network::crd(),
        Role::crd(),
        Addon::crd(),
        PodIdentityAssociation::crd(),
        FileSystem::crd(),
        ProviderConfig::crd(),
        ClusterProviderConfig::crd(),
        ProviderConfigUsage::crd(),
    ]
}

/// The file name Crossplane tooling uses for a CRD.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(crd)
}

/// Every CRD as one multi-document YAML stream.
pub fn all_yaml() -> Result<String, serde_yaml::Error> {
    let docs: Result<Vec<String>, _> = all().iter().map(to_yaml).collect();
    Ok(docs?.iter().map(|d| format!("---\n{d}")).collect())
}
