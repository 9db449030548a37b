//! For the fuzz targets: the repository's examples as composites, and a pool of the
//! objects Crossplane would send back for a composite's requirements, so a fuzzed composite reaches its composer
//! with everything it asks for.

use serde_json::Value;

/// Every example composite and fixture, by repository path.
pub const DOCUMENTS: &[(&str, &str)] = &[
    (
        "examples/classes/eks-h100-8x.yaml",
        include_str!("../../examples/classes/eks-h100-8x.yaml"),
    ),
    (
        "examples/classes/eks-h200-8x.yaml",
        include_str!("../../examples/classes/eks-h200-8x.yaml"),
    ),
    (
        "examples/classes/eks-l4-1x.yaml",
        include_str!("../../examples/classes/eks-l4-1x.yaml"),
    ),
    (
        "examples/classes/eks-l4-4x.yaml",
        include_str!("../../examples/classes/eks-l4-4x.yaml"),
    ),
    (
        "examples/clusters/eks-h200-us-east.yaml",
        include_str!("../../examples/clusters/eks-h200-us-east.yaml"),
    ),
    (
        "examples/clusters/eks-h200-us-east-standard.yaml",
        include_str!("../../examples/clusters/eks-h200-us-east-standard.yaml"),
    ),
    (
        "examples/clusters/existing-onprem.yaml",
        include_str!("../../examples/clusters/existing-onprem.yaml"),
    ),
    (
        "examples/caches/qwen3-coder.yaml",
        include_str!("../../examples/caches/qwen3-coder.yaml"),
    ),
    (
        "examples/deployments/qwen3-coder.yaml",
        include_str!("../../examples/deployments/qwen3-coder.yaml"),
    ),
    (
        "examples/deployments/qwen3-small.yaml",
        include_str!("../../examples/deployments/qwen3-small.yaml"),
    ),
    (
        "examples/deployments/qwen3-235b-pd.yaml",
        include_str!("../../examples/deployments/qwen3-235b-pd.yaml"),
    ),
    (
        "tests/fixtures/clusters/standard/eks-h200-us-west.yaml",
        include_str!("../../tests/fixtures/clusters/standard/eks-h200-us-west.yaml"),
    ),
    (
        "tests/fixtures/clusters/dynamo/eks-h200-us-east.yaml",
        include_str!("../../tests/fixtures/clusters/dynamo/eks-h200-us-east.yaml"),
    ),
];

/// Every object of every document, in order.
pub fn objects() -> Vec<Value> {
    DOCUMENTS
        .iter()
        .flat_map(|(_, text)| serde_yaml::Deserializer::from_str(text))
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter(|v: &Value| v.is_object())
        .collect()
}
