//! Derives the Crossplane 1.x ("legacy") Configuration from the v2 one, so there is one hand-written copy of
//! every XRD and Composition.
//!
//! * A `Namespaced` v2 XRD becomes a legacy XRD whose composite kind is `X<Kind>` (plural `x<plural>`) and whose
//!   claim keeps the v2 name: users on 1.x write the same `ModelDeployment` in their namespace, and Crossplane
//!   creates a cluster-scoped `XModelDeployment` for it.
//! * A `Cluster` v2 XRD keeps its kind and gets no claim (cluster-wide objects such as InferenceClass have
//!   nothing to claim from a namespace).
//! * `spec.scope` is left out: LegacyCluster is the v1 default on Crossplane v2, and 1.x's XRD has no such field.
//! * Compositions are copied with `compositeTypeRef.kind` following the rename.
//!
//! The function accepts both spellings of a kind (see `function/src/compose/mod.rs`).

use serde_json::{Value, json};

use crate::{
    manifest::Manifest,
    xrd::{XRD_V1, XRD_V2},
};

/// Annotation on generated objects naming the file they came from.
pub const GENERATED_FROM: &str = "modelplane.ai/generated-from";

/// The legacy composite kind for a v2 XRD's kind, when it differs.
pub fn composite_kind(kind: &str, namespaced: bool) -> String {
    if namespaced {
        format!("X{kind}")
    } else {
        kind.to_owned()
    }
}

/// The legacy XRD for a v2 XRD, or None for anything else.
pub fn xrd(v2: &Manifest) -> Option<Manifest> {
    if !v2.is(XRD_V2, "CompositeResourceDefinition") {
        return None;
    }
    let mut out = v2.value.clone();
    out["apiVersion"] = json!(XRD_V1);
    annotate(&mut out, v2);
    let spec = out.get_mut("spec")?.as_object_mut()?;
    let scope = spec.remove("scope");
    let namespaced = matches!(scope.as_ref().and_then(Value::as_str), None | Some("Namespaced"));
    if namespaced {
        let names = spec.get("names").cloned().unwrap_or_default();
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default();
        let plural = names.get("plural").and_then(Value::as_str).unwrap_or_default();
        let group = spec
            .get("group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut claim_names = json!({"kind": kind, "plural": plural});
        for optional in ["singular", "shortNames", "categories", "listKind"] {
            if let Some(value) = names.get(optional) {
                claim_names[optional] = value.clone();
            }
        }
        let singular = names
            .get("singular")
            .and_then(Value::as_str)
            .map(|s| format!("x{s}"));
        let mut composite_names = json!({"kind": composite_kind(kind, true), "plural": format!("x{plural}")});
        if let Some(singular) = singular {
            composite_names["singular"] = json!(singular);
        }
        if let Some(categories) = names.get("categories") {
            composite_names["categories"] = categories.clone();
        }
        spec.insert("names".into(), composite_names);
        spec.insert("claimNames".into(), claim_names);
        out["metadata"]["name"] = json!(format!("x{plural}.{group}"));
    }
    Some(Manifest::new(v2.file.clone(), v2.index, out))
}

/// The legacy Composition for a v2 Composition, given the v2 XRDs (to know which kinds were renamed).
pub fn composition(v2: &Manifest, v2_xrds: &[Manifest]) -> Manifest {
    let mut out = v2.value.clone();
    annotate(&mut out, v2);
    let api_version = v2.str_at(&["spec", "compositeTypeRef", "apiVersion"]);
    let kind = v2.str_at(&["spec", "compositeTypeRef", "kind"]);
    let renamed = v2_xrds.iter().any(|x| {
        x.str_at(&["spec", "names", "kind"]) == kind
            && api_version.starts_with(&format!("{}/", x.str_at(&["spec", "group"])))
            && matches!(
                x.value.pointer("/spec/scope").and_then(Value::as_str),
                None | Some("Namespaced")
            )
    });
    if renamed {
        out["spec"]["compositeTypeRef"]["kind"] = json!(composite_kind(kind, true));
    }
    Manifest::new(v2.file.clone(), v2.index, out)
}

fn annotate(object: &mut Value, source: &Manifest) {
    let from = format!("{}#{}", source.file.display(), source.index);
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(GENERATED_FROM.into(), json!(from));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(scope: &str) -> Manifest {
        Manifest::new(
            "x.yaml",
            0,
            json!({
            "apiVersion": XRD_V2, "kind": "CompositeResourceDefinition",
            "metadata": {"name": "modeldeployments.modelplane.ai"},
            "spec": {"group": "modelplane.ai", "scope": scope,
                     "names": {"kind": "ModelDeployment", "plural": "modeldeployments", "categories": ["modelplane"]},
                     "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
        )
    }

    #[test]
    fn a_namespaced_xrd_becomes_an_x_composite_with_the_original_name_as_its_claim() {
        let legacy = xrd(&v2("Namespaced")).unwrap();
        assert_eq!(legacy.api_version(), XRD_V1);
        assert_eq!(legacy.name(), "xmodeldeployments.modelplane.ai");
        assert_eq!(
            legacy.value["spec"]["names"],
            json!({"kind": "XModelDeployment", "plural": "xmodeldeployments", "categories": ["modelplane"]})
        );
        assert_eq!(
            legacy.value["spec"]["claimNames"],
            json!({"kind": "ModelDeployment", "plural": "modeldeployments", "categories": ["modelplane"]})
        );
        assert!(legacy.value["spec"].get("scope").is_none());
        assert_eq!(
            legacy.value["metadata"]["annotations"][GENERATED_FROM],
            "x.yaml#0"
        );
    }

    #[test]
    fn a_cluster_xrd_keeps_its_kind_and_gets_no_claim() {
        let legacy = xrd(&v2("Cluster")).unwrap();
        assert_eq!(legacy.name(), "modeldeployments.modelplane.ai");
        assert_eq!(legacy.value["spec"]["names"]["kind"], "ModelDeployment");
        assert!(legacy.value["spec"].get("claimNames").is_none());
    }

    #[test]
    fn compositions_follow_the_rename() {
        let comp = Manifest::new(
            "c.yaml",
            0,
            json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "modeldeployment"},
            "spec": {"compositeTypeRef": {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment"}}}),
        );
        let renamed = composition(&comp, &[v2("Namespaced")]);
        assert_eq!(
            renamed.value["spec"]["compositeTypeRef"]["kind"],
            "XModelDeployment"
        );
        let kept = composition(&comp, &[v2("Cluster")]);
        assert_eq!(kept.value["spec"]["compositeTypeRef"]["kind"], "ModelDeployment");
    }
}
