use serde_json::json;

use super::*;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn meta() -> Manifest {
    Manifest::new(
        "package/configuration/crossplane.yaml",
        0,
        json!({"kind": "Configuration"}),
    )
}

fn check(dependency: &'static Dependency, constraint: &str, objects: &[Manifest]) -> Vec<String> {
    let groups: Vec<&str> = objects.iter().map(Manifest::group).collect();
    let mut vendored = Vendored::load(root(), dependency, &groups).unwrap_or_else(|p| panic!("{p:?}"));
    let meta = meta();
    let declared = Declared {
        meta: &meta,
        field: "spec.dependsOn[3].version".into(),
        constraint,
    };
    check_range(&mut vendored, &declared, objects)
        .into_iter()
        .map(|p| {
            assert_eq!(p.field, "spec.dependsOn[3].version");
            p.message
        })
        .collect()
}

fn release(namespace: bool) -> Manifest {
    let mut for_provider = json!({"chart": {"name": "lws", "repository": "oci://registry.k8s.io/lws/charts", "version": "0.7.0"}});
    if namespace {
        for_provider["namespace"] = json!("lws-system");
    }
    Manifest::new(
        "examples/x.yaml → lws",
        0,
        json!({"apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "Release",
               "metadata": {"name": "lws", "namespace": "modelplane-system"},
               "spec": {"forProvider": for_provider, "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "c"}}}),
    )
}

#[test]
fn a_helm_range_admitting_v1_0_0_is_caught_by_the_release_namespace_it_would_prune() {
    let problems = check(
        &PROVIDER_HELM,
        ">=v1.0.0 <v2.0.0",
        &[release(true), release(true)],
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert!(
        p.starts_with("provider-helm \">=v1.0.0 <v2.0.0\": admits v1.0.0, whose Release CRD rejects"),
        "{p}"
    );
    assert!(p.contains("(and 1 more) at spec.forProvider.namespace"), "{p}");
    assert_eq!(
        check(&PROVIDER_HELM, ">=v1.0.2 <v2.0.0", &[release(true)]),
        Vec::<String>::new()
    );
}

#[test]
fn ranges_without_a_cap_unsatisfiable_or_older_than_any_vendored_release_fail() {
    let open = check(&PROVIDER_HELM, ">=v1.0.2", &[release(false)]);
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(open[0].contains("no upper bound"), "{open:?}");
    let empty = check(&PROVIDER_KUBERNETES, ">=v2.0.0, <v1.0.0", &[]);
    assert_eq!(
        empty,
        ["provider-kubernetes \">=v2.0.0, <v1.0.0\": no version satisfies it"]
    );
    let old = check(
        &PROVIDER_KUBERNETES,
        ">=v0.9.0 <v1.0.0-0 || >=v1.0.0 <v2.0.0",
        &[],
    );
    assert!(
        old.iter()
            .any(|p| p.contains("older than any vendored provider-kubernetes CRDs")),
        "{old:?}"
    );
}

fn xrd_with_scale() -> Manifest {
    Manifest::new(
        "package/configuration/xrds/x.yaml",
        0,
        json!({"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
               "metadata": {"name": "xs.example.org"},
               "spec": {"group": "example.org", "scope": "Namespaced", "names": {"kind": "X", "plural": "xs"},
                        "versions": [{"name": "v1", "served": true, "referenceable": true,
                                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}, "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
                                      "subresources": {"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}}),
    )
}

#[test]
fn the_xrd_scale_subresource_needs_crossplane_v2_3() {
    let problems = check(&CROSSPLANE, ">=v2.0.0-0 <v3.0.0-0", &[xrd_with_scale()]);
    let at: Vec<&String> = problems.iter().filter(|p| p.contains("subresources")).collect();
    assert!(!at.is_empty(), "{problems:#?}");
    assert!(
        at.iter()
            .all(|p| p.contains("admits v2.0.0") || p.contains("admits v2.2.0")),
        "{at:#?}"
    );
    assert_eq!(
        check(&CROSSPLANE, ">=v2.3.0-0 <v3.0.0-0", &[xrd_with_scale()]),
        Vec::<String>::new()
    );
}
