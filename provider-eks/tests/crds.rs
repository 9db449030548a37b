//! The CRDs committed in `package/provider-eks/crds/` are exactly what the Rust types generate.
//! Regenerate with `cargo run -p modelplane-provider-eks -- crds --out-dir package/provider-eks/crds`.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use modelplane_provider_eks::crds;

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../package/provider-eks/crds")
}

#[test]
fn committed_crds_match_the_rust_types() {
    for crd in crds::all() {
        let name = crds::file_name(&crd);
        let committed = std::fs::read_to_string(package_dir().join(&name))
            .unwrap_or_else(|e| panic!("{name}: {e}; regenerate the CRDs"));
        assert_eq!(
            committed,
            crds::to_yaml(&crd).unwrap(),
            "{name} drifted from the Rust types; regenerate it"
        );
    }
}

#[test]
fn the_package_holds_no_stale_crds() {
    let generated: BTreeSet<String> = crds::all().iter().map(crds::file_name).collect();
    let committed: BTreeSet<String> = std::fs::read_dir(package_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(committed, generated);
}

#[test]
fn managed_kinds_are_namespaced_and_in_the_crossplane_categories() {
    for crd in crds::all()
        .iter()
        .filter(|c| ["Cluster", "NodePool"].contains(&c.spec.names.kind.as_str()))
    {
        assert_eq!(crd.spec.scope, "Namespaced");
        let categories = crd.spec.names.categories.clone().unwrap_or_default();
        assert!(
            categories.contains(&"managed".to_string()) && categories.contains(&"crossplane".to_string())
        );
        assert!(
            crd.spec.versions[0]
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }
}

/// Cluster and NodePool embed the shared `ResourceSpec` (flattened): the Crossplane fields stay beside
/// `forProvider`, a manifest written for the spelled-out spec reads back unchanged, and the defaults still apply.
#[test]
fn the_embedded_resource_spec_keeps_the_wire_shape() {
    use modelplane_eks_api::{Cluster, ManagementPolicy, NodePool};
    let cluster = serde_json::json!({
        "apiVersion": "eks.m.modelplane.ai/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "demo", "namespace": "team-a"},
        "spec": {
            "forProvider": {
                "region": "us-east-1", "version": "1.34", "roleArn": "arn:aws:iam::1:role/r",
                "networking": {"subnetIds": ["subnet-a", "subnet-b"]},
                "endpointPublicAccess": true, "endpointPrivateAccess": false
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "aws"},
            "managementPolicies": ["Observe", "Create"],
            "writeConnectionSecretToRef": {"name": "demo-kubeconfig"}
        }
    });
    let parsed: Cluster = serde_json::from_value(cluster.clone()).unwrap();
    assert_eq!(parsed.spec.resource.provider_config_ref.name, "aws");
    assert_eq!(serde_json::to_value(&parsed).unwrap(), cluster);

    let pool = serde_json::json!({
        "apiVersion": "eks.m.modelplane.ai/v1alpha1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"forProvider": {
            "region": "us-east-1", "clusterRef": {"name": "demo"}, "nodeRoleArn": "arn:aws:iam::1:role/n",
            "instanceTypes": ["p5.48xlarge"], "scaling": {"minSize": 1, "maxSize": 2, "desiredSize": 1}
        }}
    });
    let parsed: NodePool = serde_json::from_value(pool).unwrap();
    assert_eq!(
        parsed.spec.resource.management_policies,
        vec![ManagementPolicy::All]
    );
    assert_eq!(
        parsed.spec.resource.provider_config_ref.kind,
        "ClusterProviderConfig"
    );
    let written = serde_json::to_value(&parsed).unwrap();
    assert_eq!(written["spec"]["managementPolicies"], serde_json::json!(["*"]));
    assert!(written["spec"].get("resource").is_none());
}
