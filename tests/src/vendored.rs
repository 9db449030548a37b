//! The upstream CRDs vendored in `tests/crds/`: every file a CRD with a named source, and byte for byte the
//! shared set it mirrors whenever that set is at hand.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use serde_yaml::Value;

/// Where the vendored CRDs live, relative to the repository root.
pub const VENDORED_DIR: &str = "tests/crds";
const SOURCES: &str = "SOURCES.md";

/// Every file under `dir`, as paths relative to it, sorted.
pub fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in fs::read_dir(dir.join(&relative))? {
            let entry = entry?;
            let path = relative.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Problems with the vendored folder on its own: each `.yaml` file holds only CustomResourceDefinitions with a
/// schema on every version, and a `SOURCES.md` in its folder or above names it (or a folder holding it).
pub fn check_vendored(dir: &Path) -> Vec<String> {
    let listed = match files(dir) {
        Ok(listed) => listed,
        Err(e) => return vec![format!("{}: cannot list: {e}", dir.display())],
    };
    let yaml: Vec<&PathBuf> = listed
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    let mut problems = Vec::new();
    if yaml.is_empty() {
        problems.push(format!("{}: no CRDs", dir.display()));
    }
    for relative in yaml {
        let path = dir.join(relative);
        match fs::read_to_string(&path) {
            Ok(text) => problems.extend(
                crd_problems(&text)
                    .into_iter()
                    .map(|p| format!("{}: {p}", relative.display())),
            ),
            Err(e) => problems.push(format!("{}: cannot read: {e}", relative.display())),
        }
        if !named_in_sources(dir, relative) {
            problems.push(format!(
                "{}: no {SOURCES} in its folder or above names it or a folder holding it",
                relative.display()
            ));
        }
    }
    problems
}

fn crd_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut count = 0;
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = match Value::deserialize(document) {
            Ok(Value::Null) => continue,
            Ok(value) => value,
            Err(e) => {
                problems.push(format!("document {i}: not YAML: {e}"));
                continue;
            }
        };
        count += 1;
        if value["kind"].as_str() != Some("CustomResourceDefinition") {
            problems.push(format!("document {i}: not a CustomResourceDefinition"));
            continue;
        }
        let versions = value["spec"]["versions"]
            .as_sequence()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if versions.is_empty() {
            problems.push(format!("document {i}: spec.versions is empty"));
        }
        for (j, version) in versions.iter().enumerate() {
            if version["schema"]["openAPIV3Schema"].as_mapping().is_none() {
                problems.push(format!(
                    "document {i}: spec.versions[{j}].schema.openAPIV3Schema is missing"
                ));
            }
        }
    }
    if count == 0 {
        problems.push("holds no documents".into());
    }
    problems
}

/// Is `relative` (a file under `root`) named by a `SOURCES.md` in one of its folders, by its path or by one of
/// its folders' paths (`crossplane/` for every Crossplane CRD), relative to that `SOURCES.md`?
fn named_in_sources(root: &Path, relative: &Path) -> bool {
    let mut base = relative.parent();
    while let Some(folder) = base {
        if let Ok(sources) = fs::read_to_string(root.join(folder).join(SOURCES)) {
            let below = relative.strip_prefix(folder).unwrap_or(relative);
            let mut names = vec![below.display().to_string()];
            let mut parent = below.parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                names.push(format!("{}/", p.display()));
                parent = p.parent();
            }
            if names.iter().any(|name| sources.contains(name.as_str())) {
                return true;
            }
        }
        base = folder.parent();
    }
    false
}

/// Problems keeping `vendored` in step with `shared`: every file of the shared set must be vendored byte for byte.
/// Files only the vendored folder has are allowed (each must then be named by its own `SOURCES.md`, which
/// [`check_vendored`] enforces).
pub fn check_in_sync(vendored: &Path, shared: &Path) -> Vec<String> {
    let listed = match files(shared) {
        Ok(listed) => listed,
        Err(e) => return vec![format!("{}: cannot list: {e}", shared.display())],
    };
    let mut problems = Vec::new();
    for relative in listed {
        let theirs = fs::read(shared.join(&relative));
        let ours = fs::read(vendored.join(&relative));
        match (theirs, ours) {
            (Ok(theirs), Ok(ours)) if theirs == ours => {}
            (Ok(_), Ok(_)) => problems.push(format!(
                "{}: differs from the shared copy; copy it again (cp {}/{} {VENDORED_DIR}/{})",
                relative.display(),
                shared.display(),
                relative.display(),
                relative.display()
            )),
            (Ok(_), Err(_)) => problems.push(format!(
                "{}: in the shared set but not vendored in {VENDORED_DIR}",
                relative.display()
            )),
            (Err(e), _) => problems.push(format!(
                "{}: cannot read the shared copy: {e}",
                relative.display()
            )),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: as.x.io}\nspec:\n  group: x.io\n  versions:\n  - name: v1\n    schema: {openAPIV3Schema: {type: object}}\n";

    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_crd_named_by_its_sources_passes_and_an_unnamed_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "SOURCES.md",
            "| up/ | repo | path |\n| a.yaml | repo | path |\n",
        );
        write(dir.path(), "a.yaml", CRD);
        write(dir.path(), "up/deep/b.yaml", CRD);
        assert_eq!(check_vendored(dir.path()), Vec::<String>::new());
        write(dir.path(), "c.yaml", CRD);
        assert_eq!(
            check_vendored(dir.path()),
            ["c.yaml: no SOURCES.md in its folder or above names it or a folder holding it"]
        );
    }

    #[test]
    fn a_file_that_is_not_a_crd_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "SOURCES.md", "a.yaml\n");
        write(dir.path(), "a.yaml", "apiVersion: v1\nkind: ConfigMap\n");
        assert_eq!(
            check_vendored(dir.path()),
            ["a.yaml: document 0: not a CustomResourceDefinition"]
        );
    }

    #[test]
    fn a_changed_byte_and_a_missing_file_break_the_sync() {
        let (vendored, shared) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(shared.path(), "a.yaml", CRD);
        write(shared.path(), "sub/b.yaml", CRD);
        write(vendored.path(), "a.yaml", CRD);
        write(vendored.path(), "sub/b.yaml", CRD);
        write(vendored.path(), "extra.yaml", CRD);
        assert_eq!(
            check_in_sync(vendored.path(), shared.path()),
            Vec::<String>::new()
        );
        write(
            vendored.path(),
            "a.yaml",
            &CRD.replace("v1\n    schema", "v2\n    schema"),
        );
        fs::remove_file(vendored.path().join("sub/b.yaml")).unwrap();
        let problems = check_in_sync(vendored.path(), shared.path());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("a.yaml: differs"), "{problems:?}");
        assert!(
            problems[1].starts_with("sub/b.yaml: in the shared set but not vendored"),
            "{problems:?}"
        );
    }
}
