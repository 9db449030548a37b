//! The checks over whole (small) repositories written to a temporary directory: one good fixture, and one
//! mutation per check proving it can fail.

use std::{fs, path::Path};

use super::*;
use crate::manifest::Severity;

const CONFIGURATION: &str = r#"
apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: c
  annotations: &annotations
    meta.crossplane.io/maintainer: m
    meta.crossplane.io/source: s
    meta.crossplane.io/license: Apache-2.0
    meta.crossplane.io/description: d
spec:
  crossplane: {version: ">=v2.0.0-0, <v3.0.0-0"}
  dependsOn:
  - {apiVersion: pkg.crossplane.io/v1, kind: Function, package: ghcr.io/modelplaneai/function-modelplane, version: ">=v0.1.0, <v1.0.0"}
  - {apiVersion: pkg.crossplane.io/v1, kind: Provider, package: ghcr.io/modelplaneai/provider-eks, version: ">=v0.1.0, <v1.0.0"}
  - {apiVersion: pkg.crossplane.io/v1, kind: Provider, package: xpkg.crossplane.io/crossplane-contrib/provider-kubernetes, version: ">=v1.0.0, <v2.0.0"}
  - {apiVersion: pkg.crossplane.io/v1, kind: Provider, package: xpkg.crossplane.io/crossplane-contrib/provider-helm, version: ">=v1.0.2, <v2.0.0"}
"#;

const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata: {name: widgets.modelplane.ai}
spec:
  group: modelplane.ai
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              max: {type: integer}
            x-kubernetes-validations:
            - {rule: "!has(self.max) || self.size <= self.max", message: size must not exceed max}
"#;

const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: widgets.modelplane.ai}
spec:
  compositeTypeRef: {apiVersion: modelplane.ai/v1alpha1, kind: Widget}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: modelplaneai-function-modelplane}
"#;

const EXAMPLE: &str = r#"
apiVersion: modelplane.ai/v1alpha1
kind: Widget
metadata: {name: w, namespace: team}
spec: {size: 2, max: 4}
"#;

const ACTIVATION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata: {name: workload}
spec:
  activate: [objects.kubernetes.m.crossplane.io]
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusters.eks.m.modelplane.ai}
spec:
  group: eks.m.modelplane.ai
  scope: Namespaced
  names: {kind: Cluster, plural: clusters}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {forProvider: {type: object, properties: {region: {type: string}}}}}
"#;

fn meta(kind: &str, extra: &str) -> String {
    format!(
        "apiVersion: meta.pkg.crossplane.io/v1\nkind: {kind}\nmetadata:\n  name: x\n  annotations:\n    \
         meta.crossplane.io/maintainer: m\n    meta.crossplane.io/source: s\n    meta.crossplane.io/license: l\n    \
         meta.crossplane.io/description: d\nspec:\n  crossplane: {{version: \">=v2.0.0-0, <v3.0.0-0\"}}\n{extra}"
    )
}

/// Writes a repository whose every check passes.
fn good_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("package/configuration/crossplane.yaml", CONFIGURATION.to_owned()),
        ("package/configuration/xrds/widget.yaml", XRD.to_owned()),
        ("package/configuration/compositions/widget.yaml", COMPOSITION.to_owned()),
        ("package/configuration/activation/workload.yaml", ACTIVATION.to_owned()),
        ("package/function/crossplane.yaml", meta("Function", "  capabilities: [composition]\n")),
        ("package/provider-eks/crossplane.yaml", meta("Provider", "  capabilities: [SafeStart]\n")),
        ("package/provider-eks/crds/cluster.yaml", CRD.to_owned()),
        ("examples/widget.yaml", EXAMPLE.to_owned()),
        (
            "examples/cluster.yaml",
            "apiVersion: eks.m.modelplane.ai/v1alpha1\nkind: Cluster\nmetadata: {name: c}\nspec: {forProvider: {region: us-east-1}}\n".to_owned(),
        ),
    ] {
        write(dir.path(), path, &text);
    }
    // The vendored upstream CRDs the dependency ranges are checked against.
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    std::os::unix::fs::symlink(
        repo_root().join(crate::vendored::VENDORED_DIR),
        dir.path().join("tests/crds"),
    )
    .unwrap();
    dir
}

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn write(root: &Path, path: &str, text: &str) {
    let file = root.join(path);
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(file, text).unwrap();
}

fn edit(root: &Path, path: &str, from: &str, to: &str) {
    let text = fs::read_to_string(root.join(path)).unwrap();
    assert!(text.contains(from), "{path} does not contain {from:?}");
    write(root, path, &text.replacen(from, to, 1));
}

fn errors(root: &Path) -> Vec<String> {
    check(root)
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| p.to_string())
        .collect()
}

/// The one error a mutation causes; asserts there is exactly one so each test pins its check.
fn only_error(root: &Path) -> String {
    let found = errors(root);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

#[test]
fn the_good_fixture_passes_every_check() {
    let repo = good_repo();
    assert_eq!(errors(repo.path()), Vec::<String>::new());
}

#[test]
fn an_example_with_a_schema_violation_is_named_by_file_object_and_field() {
    let repo = good_repo();
    edit(repo.path(), "examples/widget.yaml", "size: 2", "size: 0");
    assert_eq!(
        only_error(repo.path()),
        "examples/widget.yaml#0: Widget/w: spec.size: value is less than the minimum of 1"
    );
}

#[test]
fn an_example_with_an_unknown_field_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "examples/widget.yaml",
        "max: 4",
        "max: 4, colour: red",
    );
    assert!(only_error(repo.path()).contains("Widget/w: spec.colour: unknown field"));
}

#[test]
fn an_example_breaking_a_cel_rule_fails_with_the_rules_message() {
    let repo = good_repo();
    edit(repo.path(), "examples/widget.yaml", "max: 4", "max: 1");
    assert!(only_error(repo.path()).contains("spec: size must not exceed max"));
}

#[test]
fn a_provider_crd_validates_its_examples_too() {
    let repo = good_repo();
    edit(
        repo.path(),
        "examples/cluster.yaml",
        "region: us-east-1",
        "region: 1",
    );
    assert!(only_error(repo.path()).contains("Cluster/c: spec.forProvider.region"));
}

#[test]
fn a_non_structural_xrd_schema_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/xrds/widget.yaml",
        "max: {type: integer}",
        "max: {}",
    );
    let found = errors(repo.path());
    assert!(
        found[0].contains("openAPIV3Schema.properties.spec.properties.max: structural schemas need a type"),
        "{found:#?}"
    );
}

#[test]
fn an_xrd_cel_rule_that_does_not_compile_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/xrds/widget.yaml",
        "self.size <= self.max",
        "self.size <=",
    );
    let found = errors(repo.path());
    assert!(
        found
            .iter()
            .any(|e| e.contains("x-kubernetes-validations[0]: failed to compile CEL rule")),
        "{found:#?}"
    );
}

#[test]
fn a_composition_calling_another_function_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/compositions/widget.yaml",
        "modelplaneai-function-modelplane",
        "function-modelplane",
    );
    let found = errors(repo.path());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("spec.pipeline[0].functionRef.name: \"function-modelplane\" is not \"modelplaneai-function-modelplane\""));
}

#[test]
fn a_composition_for_a_kind_without_an_xrd_fails_and_the_xrd_without_a_composition_too() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/compositions/widget.yaml",
        "kind: Widget",
        "kind: Widgets",
    );
    let found = errors(repo.path());
    assert!(
        found
            .iter()
            .any(|e| e.contains("no XRD here defines composite modelplane.ai/v1alpha1 Widgets")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|e| e.contains("no Composition targets Widget")),
        "{found:#?}"
    );
}

#[test]
fn an_activation_policy_waking_provider_eks_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/activation/workload.yaml",
        "[objects",
        "[clusters.eks.m.modelplane.ai, objects",
    );
    assert!(
        only_error(repo.path()).contains("spec.activate[0]: \"clusters.eks.m.modelplane.ai\" would activate")
    );
}

#[test]
fn a_provider_without_safe_start_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/provider-eks/crossplane.yaml",
        "[SafeStart]",
        "[]",
    );
    assert!(only_error(repo.path()).ends_with("spec.capabilities: must include SafeStart"));
}

#[test]
fn a_missing_dependency_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/crossplane.yaml",
        "provider-helm",
        "provider-helmet",
    );
    assert!(
        only_error(repo.path()).ends_with(&format!("spec.dependsOn: must depend on {PROVIDER_HELM_PACKAGE}"))
    );
}

#[test]
fn broken_yaml_fails_naming_the_file() {
    let repo = good_repo();
    write(repo.path(), "examples/broken.yaml", "kind: [Widget\n");
    assert!(only_error(repo.path()).starts_with("examples/broken.yaml: document 0 is not valid YAML"));
}

#[test]
fn kinds_the_configuration_should_define_are_reported_missing_not_failed() {
    let repo = good_repo();
    let missing: Vec<Problem> = check(repo.path())
        .into_iter()
        .filter(|p| p.severity == Severity::Missing)
        .collect();
    let expected: Vec<String> = EXPECTED_KINDS
        .iter()
        .map(|k| format!("no XRD defines {GROUP} {k} yet"))
        .collect();
    assert_eq!(
        missing.iter().map(|p| p.message.clone()).collect::<Vec<_>>(),
        expected
    );
}

#[test]
fn build_writes_each_stream_meta_first() {
    let repo = good_repo();
    let out = repo.path().join("out");
    let files = build(repo.path(), &out).unwrap();
    assert_eq!(files.len(), 3);
    let parse = |name: &str| {
        let file = out.join(name).join("package.yaml");
        manifest::parse_stream(&file, &fs::read_to_string(&file).unwrap()).unwrap()
    };
    let config = parse("configuration");
    let kinds: Vec<&str> = config.iter().map(Manifest::kind).collect();
    assert_eq!(
        kinds,
        ["Configuration", "CompositeResourceDefinition", "Composition"]
    );
    assert_eq!(
        parse("provider-eks")
            .iter()
            .map(Manifest::kind)
            .collect::<Vec<_>>(),
        ["Provider", "CustomResourceDefinition"]
    );
}

#[test]
fn a_dependency_range_admitting_a_release_that_prunes_a_composed_field_fails_naming_both() {
    let repo = good_repo();
    for example in [
        "examples/clusters/existing-onprem.yaml",
        "examples/classes/eks-h200-8x.yaml",
    ] {
        write(
            repo.path(),
            example,
            &fs::read_to_string(repo_root().join(example)).unwrap(),
        );
    }
    assert_eq!(errors(repo.path()), Vec::<String>::new());
    edit(
        repo.path(),
        "package/configuration/crossplane.yaml",
        ">=v1.0.2, <v2.0.0",
        ">=v1.0.0, <v2.0.0",
    );
    let found = only_error(repo.path());
    assert!(found.contains("spec.dependsOn[3].version: provider-helm \">=v1.0.0, <v2.0.0\": admits v1.0.0, whose Release CRD rejects"), "{found}");
    assert!(
        found.contains("examples/clusters/existing-onprem.yaml → "),
        "{found}"
    );
    assert!(
        found.contains("at spec.forProvider.namespace: unknown field"),
        "{found}"
    );
}

#[test]
fn a_range_without_a_cap_or_below_what_the_function_needs_fails() {
    let repo = good_repo();
    edit(
        repo.path(),
        "package/function/crossplane.yaml",
        ">=v2.0.0-0, <v3.0.0-0",
        ">=v1.17.0-0, <v3.0.0-0",
    );
    let found = errors(repo.path());
    assert!(
        found.iter().any(|e| e.contains("spec.crossplane.version: Crossplane \">=v1.17.0-0, <v3.0.0-0\": admits v1.17.0, older than any vendored Crossplane CRDs")),
        "{found:#?}"
    );
    let repo = good_repo();
    edit(
        repo.path(),
        "package/configuration/crossplane.yaml",
        "provider-kubernetes, version: \">=v1.0.0, <v2.0.0\"",
        "provider-kubernetes, version: \">=v1.0.0\"",
    );
    assert!(
        only_error(repo.path())
            .contains("spec.dependsOn[2].version: provider-kubernetes \">=v1.0.0\": has no upper bound")
    );
}

/// The good repository with the platform team's example package (`examples/platform/`) copied in.
fn repo_with_platform_example() -> tempfile::TempDir {
    let repo = good_repo();
    let from = repo_root().join("examples/platform");
    for file in crate::vendored::files(&from).unwrap() {
        let text = fs::read_to_string(from.join(&file)).unwrap();
        write(
            repo.path(),
            &format!("examples/platform/{}", file.display()),
            &text,
        );
    }
    repo
}

#[test]
fn a_platform_package_must_depend_on_the_functions_its_compositions_call() {
    let repo = repo_with_platform_example();
    assert_eq!(errors(repo.path()), Vec::<String>::new());
    edit(
        repo.path(),
        "examples/platform/composition.yaml",
        "name: crossplane-contrib-function-go-templating",
        "name: function-go-templating",
    );
    let found = only_error(repo.path());
    assert!(
        found.contains("spec.pipeline[0].functionRef.name: \"function-go-templating\" is not a Function"),
        "{found}"
    );
    assert!(
        found.contains("crossplane-contrib-function-go-templating"),
        "{found}"
    );
}

#[test]
fn a_platform_package_range_without_a_cap_fails() {
    let repo = repo_with_platform_example();
    edit(
        repo.path(),
        "examples/platform/crossplane.yaml",
        "\">=v0.11.0, <v1.0.0-0\"",
        "\">=v0.11.0\"",
    );
    let found = only_error(repo.path());
    assert!(found.contains("examples/platform/crossplane.yaml#0"), "{found}");
    assert!(
        found.contains("spec.dependsOn[1].version: xpkg.crossplane.io/crossplane-contrib/function-go-templating \">=v0.11.0\": has no upper bound"),
        "{found}"
    );
}

/// `examples/classes/` is what the README has users apply beside the examples, and the package ships the same
/// classes in `package/configuration/classes/`: the two folders hold the same files, byte for byte.
#[test]
fn the_example_classes_are_the_packaged_classes() {
    let files = |dir: &str| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(repo_root().join(dir))
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                (name, fs::read(&path).unwrap())
            })
            .collect();
        files.sort();
        files
    };
    let examples = files("examples/classes");
    assert!(!examples.is_empty());
    assert!(
        examples == files("package/configuration/classes"),
        "examples/classes/ and package/configuration/classes/ differ: change both alike"
    );
}
