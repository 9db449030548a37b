//! Every example composite rendered through our function, in-process, the way `modelplane-function render`
//! (and Crossplane's requirements loop) would: what it composes must fit the dependencies' CRDs too.

use std::path::{Path, PathBuf};

use modelplane_function::{
    compose::COMPOSERS,
    proto::v1::Severity,
    render::{self, COMPOSITION_RESOURCE_NAME, Inputs},
    run_function,
};
use serde_json::Value;

use crate::{
    manifest::{self, Manifest, Problem},
    package::GROUP,
};

/// The objects a composite may require, as sets that belong together: the example classes with each fleet
/// the tests keep (InferenceClusters with the status their composition gives them, staged caches), and the
/// clouds' provider configs a provisioned cluster requires.
const WORLDS: &[&[&str]] = &[
    &["examples/classes", "examples/install"],
    &["examples/classes", "tests/fixtures/clusters/standard"],
    &["examples/classes", "tests/fixtures/clusters/dynamo"],
    &["examples/classes", "tests/fixtures/model-cache"],
];

/// Is this example a composite our function composes?
pub fn is_our_composite(m: &Manifest) -> bool {
    m.group() == GROUP && COMPOSERS.iter().any(|(kind, _)| *kind == m.kind())
}

/// What our function composes for each of `composites` in every world, as manifests named after the example
/// (`<file> → <composition resource name>`). An example that no world composes without a FATAL result, or that
/// composes nothing, is a problem.
pub fn render_all(root: &Path, composites: &[&Manifest]) -> (Vec<Manifest>, Vec<Problem>) {
    let mut problems = Vec::new();
    let worlds: Vec<Vec<Value>> = WORLDS
        .iter()
        .map(|dirs| {
            dirs.iter()
                .map(|dir| root.join(dir))
                // A repository without the fixtures (a scratch one in the checker's own tests) has fewer fleets.
                .filter(|dir| dir.is_dir())
                .flat_map(|dir| {
                    let (found, bad) = manifest::load_dir(&dir);
                    problems.extend(bad);
                    found.into_iter().map(|m| m.value)
                })
                .collect()
        })
        .collect();
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            return (
                Vec::new(),
                vec![Problem::file(
                    root,
                    format!("cannot start a runtime to render: {e}"),
                )],
            );
        }
    };
    let mut composed = Vec::new();
    for xr in composites {
        let mut fatal = Vec::new();
        let mut rendered_any = false;
        for required in &worlds {
            let inputs = Inputs {
                composite: xr.value.clone(),
                required: required.clone(),
                ..Default::default()
            };
            let rsp = runtime.block_on(render::run(&inputs, |req| async move { Ok(run_function(req)) }));
            let rsp = match rsp {
                Ok(rsp) => rsp,
                Err(e) => {
                    fatal.push(e.to_string());
                    continue;
                }
            };
            let failed: Vec<&str> = rsp
                .results
                .iter()
                .filter(|r| r.severity == Severity::Fatal as i32)
                .map(|r| r.message.as_str())
                .collect();
            if !failed.is_empty() {
                fatal.extend(failed.iter().map(|m| (*m).to_owned()));
                continue;
            }
            rendered_any = true;
            let documents = render::documents(&inputs, &rsp).unwrap_or_default();
            for (index, document) in documents.into_iter().enumerate() {
                let Some(key) = document
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(COMPOSITION_RESOURCE_NAME))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                else {
                    continue;
                };
                let file = PathBuf::from(format!("{} → {key}", xr.file.display()));
                composed.push(Manifest::new(file, index, document));
            }
        }
        if !rendered_any {
            problems.push(xr.problem(
                "",
                format!(
                    "renders with a FATAL result against every example fleet: {}",
                    fatal.join("; ")
                ),
            ));
        }
    }
    (composed, problems)
}
