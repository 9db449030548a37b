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
