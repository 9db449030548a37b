//! Settled InferenceCluster reconciles, one per provisioned cloud: an example Dynamo cluster with everything it
//! composes observed Ready (as `render --until-ready` simulates its provider), which is what Crossplane sends for
//! every cluster of a fleet on each poll once the fleet is up. A 100-cluster mixed-cloud fleet is
//! [`CLUSTERS_PER_CLOUD`] of each, so its reconcile cost is that many times the sum of these.

use std::path::{Path, PathBuf};

use modelplane_function::{proto::v1::RunFunctionRequest, render::RequestBuilder};
use serde::Deserialize;
use serde_json::Value;

/// The example cluster of each cloud, as `examples/clusters/` names it.
pub const CLOUDS: &[(&str, &str)] = &[
    ("EKS", "eks-h200-us-east.yaml"),
    ("GKE", "gke-h100-us-central.yaml"),
    ("AKS", "aks-h100-westeurope.yaml"),
    ("Nebius", "nebius-h100-eu-north1.yaml"),
    ("Vultr", "vultr-l40s-ewr.yaml"),
];
/// 100 clusters, evenly over the clouds above.
pub const CLUSTERS_PER_CLOUD: usize = 20;
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn documents(path: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| serde_yaml::Value::deserialize(doc).ok())
        .filter_map(|doc| serde_json::to_value(doc).ok())
        .filter(|doc| doc.is_object())
        .collect()
}

fn directory(dir: &str) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(repo_root().join(dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths.iter().flat_map(|p| documents(p)).collect()
}

/// The settled reconcile of cloud `index` of [`CLOUDS`]: its requirements answered from the example classes and
/// provider configs, and every composed resource observed Ready.
pub fn settled(index: usize) -> RunFunctionRequest {
    let (_, file) = CLOUDS[index % CLOUDS.len()];
    let xr = documents(&repo_root().join("examples/clusters").join(file))
        .into_iter()
        .next()
        .unwrap_or_default();
    let required: Vec<Value> = ["examples/classes", "examples/install"]
        .iter()
        .flat_map(|dir| directory(dir))
        .collect();
    super::settle(
        RequestBuilder::new(&xr)
            .tag(&super::tag_for(&xr))
            .answered_from(&required)
            .build(),
    )
}
