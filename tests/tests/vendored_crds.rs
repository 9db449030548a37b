//! The vendored upstream CRDs (`tests/crds/`) stand on their own, and match the shared set when it is here.

use std::path::{Path, PathBuf};

use modelplane_tests::vendored::{VENDORED_DIR, check_in_sync, check_vendored};

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The shared CRD set the vendored one mirrors: `$MODELPLANE_SHARED/crds`, else `../shared/crds` beside the
/// repository. A fresh clone has neither, and then the vendored copies alone are checked.
fn shared_crds() -> Option<PathBuf> {
    let shared = std::env::var_os("MODELPLANE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared"));
    let crds = shared.join("crds");
    crds.is_dir().then_some(crds)
}

#[test]
fn every_vendored_file_is_a_crd_with_a_named_source() {
    let problems = check_vendored(&repo_root().join(VENDORED_DIR));
    assert!(problems.is_empty(), "{VENDORED_DIR}:\n{}", problems.join("\n"));
}

#[test]
fn the_vendored_crds_match_the_shared_set_when_it_is_present() {
    let vendored = repo_root().join(VENDORED_DIR);
    let problems = match shared_crds() {
        Some(shared) => check_in_sync(&vendored, &shared),
        // Nothing to compare with: the vendored set must then be complete on its own.
        None => check_vendored(&vendored),
    };
    assert!(problems.is_empty(), "{VENDORED_DIR}:\n{}", problems.join("\n"));
}
