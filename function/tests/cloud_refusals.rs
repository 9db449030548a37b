//! What every upjet cloud refuses the same way, over every example cluster of that cloud: a missing provider
//! config is one FATAL naming `spec.cluster.<cloud>.credentials` with nothing composed, and the XRD refuses a
//! change of `source` or of the cloud's region field as the API server would.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{fatal, problems, read_documents, repo_root, xrd_schema, yaml_files};
use serde_json::{Value, json};

/// Each upjet cloud: its `source`, its spec block, its region field, and the provider config's API group.
const CLOUDS: &[(&str, &str, Option<&str>, &str)] = &[
    ("GKE", "gke", Some("region"), "gcp.m.upbound.io/v1beta1"),
    ("AKS", "aks", Some("location"), "azure.m.upbound.io/v1beta1"),
    // A Nebius cluster's region is its project's, which only the provider config knows.
    ("Nebius", "nebius", None, "nebius.m.upbound.io/v1beta1"),
    ("Vultr", "vultr", Some("region"), "vultr.m.upbound.io/v1beta1"),
];

fn documents(dir: &str) -> Vec<Value> {
    yaml_files(&repo_root().join("examples").join(dir))
        .iter()
        .flat_map(|path| read_documents(path))
        .collect()
}

/// The example clusters of `source`, at least one per cloud.
fn clusters(source: &str) -> Vec<Value> {
    let found: Vec<Value> = documents("clusters")
        .into_iter()
        .filter(|d| d["spec"]["cluster"]["source"] == source)
        .collect();
    assert!(!found.is_empty(), "no example cluster for {source}");
    found
}

#[test]
fn without_its_provider_config_a_cluster_composes_nothing_and_names_the_field() {
    let classes = documents("classes");
    for (source, block, _, api_version) in CLOUDS {
        for cluster in clusters(source) {
            let name = cluster["metadata"]["name"].as_str().unwrap().to_owned();
            let rsp = common::render(&cluster, classes.clone());
            let found = fatal(&rsp);
            let field = format!("spec.cluster.{block}.credentials: ");
            assert!(
                found.len() == 1 && found[0].contains(&field) && found[0].contains(api_version),
                "{name}: {found:?}"
            );
            assert!(
                rsp.desired.iter().all(|d| d.resources.is_empty()),
                "{name}: composed something without credentials"
            );
        }
    }
}

#[test]
fn the_xrd_refuses_a_change_of_source_or_region_and_accepts_a_resize() {
    let schema = xrd_schema("inferenceclusters.yaml");
    for (source, block, region, _) in CLOUDS {
        for old in clusters(source) {
            let name = old["metadata"]["name"].as_str().unwrap().to_owned();
            assert_eq!(problems(&schema, &old, None), Vec::<String>::new(), "{name}");

            let mut moved = old.clone();
            moved["spec"]["cluster"]["source"] = json!("Existing");
            moved["spec"]["cluster"]["existing"] =
                json!({"secretRef": {"name": "k", "namespace": "crossplane-system", "key": "kubeconfig"}});
            moved["spec"]["cluster"].as_object_mut().unwrap().remove(*block);
            let found = problems(&schema, &moved, Some(&old));
            assert!(
                found.iter().any(|p| p.contains("source is immutable")),
                "{name}: {found:#?}"
            );

            if let Some(region) = region {
                let mut elsewhere = old.clone();
                elsewhere["spec"]["cluster"][block][region] = json!("elsewhere1");
                let found = problems(&schema, &elsewhere, Some(&old));
                let message = format!("{region} is immutable");
                assert!(found.iter().any(|p| p.contains(&message)), "{name}: {found:#?}");
            }

            let mut resized = old.clone();
            resized["spec"]["nodePools"][0]["nodeCount"] = json!(3);
            assert_eq!(
                problems(&schema, &resized, Some(&old)),
                Vec::<String>::new(),
                "{name}: a resize is refused"
            );
        }
    }
}
