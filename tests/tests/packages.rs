//! The package checker over this repository, as CI runs it.

use std::{path::Path, process::Command};

use modelplane_tests::{
    manifest::Severity,
    package::{self, Repo},
};

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn this_repositorys_packages_and_examples_have_no_errors() {
    let errors: Vec<String> = package::check(repo_root())
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| p.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "modelplane-package check found:\n{}",
        errors.join("\n")
    );
}

#[test]
fn this_repositorys_configuration_ships_a_composition_per_expected_kind_calling_our_function() {
    let repo = Repo::load(repo_root());
    for kind in package::EXPECTED_KINDS {
        let composition =
            repo.configuration.objects.iter().find(|m| {
                m.kind() == "Composition" && m.str_at(&["spec", "compositeTypeRef", "kind"]) == *kind
            });
        let composition = composition.unwrap_or_else(|| panic!("no Composition for {kind}"));
        assert_eq!(
            composition.value["spec"]["pipeline"][0]["functionRef"]["name"],
            package::function_name()
        );
    }
}

#[test]
fn the_binary_exits_non_zero_and_names_the_field_on_a_bad_example() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &str| {
        let source = repo_root().join(from);
        let target = dir.path().join(from);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(source, target).unwrap();
    };
    for meta in ["configuration", "function", "provider-eks"] {
        copy(&format!("package/{meta}/crossplane.yaml"));
    }
    copy("package/configuration/compositions/modelcache.yaml");
    copy("package/configuration/xrds/modelcaches.yaml");
    let bad = std::fs::read_to_string(repo_root().join("examples/caches/qwen3-coder.yaml"))
        .unwrap()
        .replace("sizeGiB: 1024", "sizeGiB: 0");
    std::fs::create_dir_all(dir.path().join("examples")).unwrap();
    std::fs::write(dir.path().join("examples/cache.yaml"), bad).unwrap();

    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_modelplane-package"))
            .args(args)
            .arg("--root")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: examples/cache.yaml#0: ModelCache/qwen3-coder: spec.huggingFace.sizeGiB:"),
        "{stderr}"
    );
    // Kinds whose XRDs are absent are only "missing" until --strict.
    std::fs::remove_file(dir.path().join("examples/cache.yaml")).unwrap();
    assert_eq!(run(&["check"]).status.code(), Some(0));
    assert_eq!(run(&["check", "--strict"]).status.code(), Some(1));
}
