//! Proof that `$(MODELPLANE_LEADER_ADDRESS)` in the seed manifest's command resolves to the leader pod's DNS
//! name, and `MODELPLANE_RANK` to the pod's rank, on both stacks.
//!
//! No cluster runs here, so the test models what decides it: Kubernetes' `$(VAR)` expansion (an env value sees
//! only variables defined before it; command and args see the whole env; `$$` escapes; an unknown reference
//! stays as written) and how each controller injects its own variables into the composed pod templates: LWS
//! prepends, Grove up to v0.1.0-alpha.12-rc1 (the alpha.6 we pin included) appends, and Grove after #753
//! prepends. Pod names come from each controller's naming rules, independently of our env.

// A test that cannot read its own fixtures should stop right there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use modelplane_function::{
    compose::model_deployment::{CACHE, CLUSTERS, compose},
    render::RequestBuilder,
    wire::RawStruct,
};
use serde_json::{Value, json};

fn example(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The seed with `copies` copies of a gang of one leader and `workers` workers, composed onto `cluster`.
fn gang_workload(cluster: &str, copies: u32, workers: u32) -> Value {
    let mut xr = example("examples/deployments/qwen3-coder.yaml");
    xr["spec"]["template"]["spec"]["engines"][0]["copies"] = json!(copies);
    xr["spec"]["template"]["spec"]["engines"][0]["members"][1]["worker"]["nodes"] = json!(workers);
    let mut cluster = example(cluster);
    cluster["status"]["pools"][0]["nodeCount"] = json!(copies * (workers + 1));
    // The seed references a ModelCache; engines start only where it is staged.
    let cache = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
        "status": {"clusters": [{"cluster": cluster["metadata"]["name"], "phase": "Ready"}]}});
    let req = RequestBuilder::new(&xr)
        .required(CLUSTERS, std::slice::from_ref(&cluster))
        .required(CACHE, &[cache])
        .build();
    let out = compose(&req, &RawStruct::from_value(&xr).unwrap()).unwrap();
    let key = format!(
        "replica-0-{}-qwen3-coder",
        cluster["metadata"]["name"].as_str().unwrap()
    );
    Value::Object(out.resources[&key].object.to_map())["spec"]["forProvider"]["manifest"].clone()
}

/// Kubernetes' `$(VAR)` expansion of `input` against `vars`.
fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('(')
            && let Some(end) = tail.find(')')
        {
            let name = &tail[..end];
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&format!("$({name})")),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The env a container ends up with: each value expanded against the variables before it; fieldRefs to
/// labels read from the pod.
fn resolve_env(env: &[Value], labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for entry in env {
        let name = entry["name"].as_str().unwrap().to_owned();
        let value = if let Some(path) = entry
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        {
            match path
                .strip_prefix("metadata.labels['")
                .and_then(|p| p.strip_suffix("']"))
            {
                Some(label) => labels.get(label).cloned().unwrap_or_default(),
                // Other pod fields (name, uid, namespace) play no part in the address.
                None => format!("<{path}>"),
            }
        } else {
            expand(entry["value"].as_str().unwrap_or_default(), &vars)
        };
        vars.insert(name, value);
    }
    vars
}

fn literal(name: &str, value: impl ToString) -> Value {
    json!({"name": name, "value": value.to_string()})
}

/// Puts a controller's variables before the template's (which lose to them on a name clash), or after.
fn inject(template_env: &Value, controller: Vec<Value>, prepend: bool) -> Vec<Value> {
    let template: Vec<Value> = template_env.as_array().cloned().unwrap_or_default();
    if prepend {
        let names: Vec<Value> = controller.iter().map(|e| e["name"].clone()).collect();
        controller
            .into_iter()
            .chain(template.into_iter().filter(|e| !names.contains(&e["name"])))
            .collect()
    } else {
        template.into_iter().chain(controller).collect()
    }
}

/// What the engine sees: `--master-addr` after command expansion, and its rank.
fn engine_view(container: &Value, env: &[Value], labels: &BTreeMap<String, String>) -> (String, String) {
    let vars = resolve_env(env, labels);
    let command = expand(container["command"][2].as_str().unwrap(), &vars);
    let master = command
        .split_whitespace()
        .find_map(|arg| arg.strip_prefix("--master-addr="))
        .unwrap()
        .to_owned();
    (master, vars["MODELPLANE_RANK"].clone())
}

#[derive(Clone, Copy, Debug)]
enum Grove {
    /// Releases up to v0.1.0-alpha.12-rc1, including the alpha.6 Modelplane pins: variables appended.
    Released,
    /// Main after grove#753: variables prepended.
    Prepending,
}

/// (pod, leader DNS name as the controller names it, what the engine sees) for every pod of the gang.
type Observation = (String, String, (String, String));

fn lws_pods(lws: &Value) -> Vec<Observation> {
    let name = lws["metadata"]["name"].as_str().unwrap();
    let ns = lws["metadata"]["namespace"].as_str().unwrap();
    let spec = &lws["spec"];
    let size = spec["leaderWorkerTemplate"]["size"].as_u64().unwrap();
    let mut seen = Vec::new();
    for group in 0..spec["replicas"].as_u64().unwrap() {
        let leader_dns = format!("{name}-{group}.{name}.{ns}");
        for worker in 0..size {
            let template = if worker == 0 {
                "leaderTemplate"
            } else {
                "workerTemplate"
            };
            let container = &spec["leaderWorkerTemplate"][template]["spec"]["containers"][0];
            let injected = vec![
                literal("LWS_LEADER_ADDRESS", &leader_dns),
                literal("LWS_GROUP_SIZE", size),
                literal("LWS_WORKER_INDEX", worker),
            ];
            let env = inject(&container["env"], injected, true);
            let pod = format!("{name}-{group}-{worker}");
            seen.push((
                pod,
                leader_dns.clone(),
                engine_view(container, &env, &BTreeMap::new()),
            ));
        }
    }
    seen
}

fn grove_pods(pcs: &Value, grove: Grove) -> Vec<Observation> {
    let name = pcs["metadata"]["name"].as_str().unwrap();
    let ns = pcs["metadata"]["namespace"].as_str().unwrap();
    let template = &pcs["spec"]["template"];
    let group = &template["podCliqueScalingGroups"][0];
    let group_name = group["name"].as_str().unwrap();
    let leader_clique = group["cliqueNames"][0].as_str().unwrap();
    let headless = format!("{name}-0.{ns}.svc.cluster.local");
    let mut seen = Vec::new();
    for copy in 0..group["replicas"].as_u64().unwrap() {
        let leader_dns = format!("{name}-0-{group_name}-{copy}-{leader_clique}-0.{headless}");
        for clique in template["cliques"].as_array().unwrap() {
            let clique_name = format!(
                "{name}-0-{group_name}-{copy}-{}",
                clique["name"].as_str().unwrap()
            );
            let container = &clique["spec"]["podSpec"]["containers"][0];
            for index in 0..clique["spec"]["replicas"].as_u64().unwrap() {
                let labels = BTreeMap::from([
                    (
                        "grove.io/podcliquescalinggroup-replica-index".to_owned(),
                        copy.to_string(),
                    ),
                    (
                        "grove.io/podcliquescalinggroup".to_owned(),
                        format!("{name}-0-{group_name}"),
                    ),
                ]);
                let injected = vec![
                    literal("GROVE_PCS_NAME", name),
                    literal("GROVE_PCS_INDEX", 0),
                    literal("GROVE_PCLQ_NAME", &clique_name),
                    literal("GROVE_HEADLESS_SERVICE", &headless),
                    literal("GROVE_PCLQ_POD_INDEX", index),
                    literal("GROVE_PCSG_NAME", format!("{name}-0-{group_name}")),
                    literal("GROVE_PCSG_INDEX", copy),
                ];
                let env = inject(&container["env"], injected, matches!(grove, Grove::Prepending));
                let pod = format!("{clique_name}-{index}");
                seen.push((pod, leader_dns.clone(), engine_view(container, &env, &labels)));
            }
        }
    }
    seen
}

/// Every pod points at its own copy's leader; ranks are 0 on the leader and 1..N on the workers of each copy.
fn assert_gang(seen: &[Observation], copies: usize, workers: usize, what: &str) {
    assert_eq!(seen.len(), copies * (workers + 1), "{what}: pod count");
    for (pod, leader_dns, (master, _)) in seen {
        assert_eq!(
            master, leader_dns,
            "{what}: {pod} resolves --master-addr to its own leader"
        );
    }
    let mut by_leader: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (_, leader_dns, (_, rank)) in seen {
        by_leader
            .entry(leader_dns)
            .or_default()
            .push(rank.parse().unwrap());
    }
    assert_eq!(by_leader.len(), copies, "{what}: one leader per copy");
    for ranks in by_leader.values_mut() {
        ranks.sort();
        assert_eq!(
            *ranks,
            (0..=workers as u64).collect::<Vec<_>>(),
            "{what}: ranks 0..=N per copy"
        );
    }
}

#[test]
fn leader_address_and_rank_resolve_on_standard_for_one_and_many_copies() {
    for (copies, workers) in [(1, 1), (3, 1), (3, 3)] {
        let lws = gang_workload(
            "tests/fixtures/clusters/standard/eks-h200-us-west.yaml",
            copies,
            workers,
        );
        assert_gang(
            &lws_pods(&lws),
            copies as usize,
            workers as usize,
            &format!("LWS copies={copies} workers={workers}"),
        );
    }
}

#[test]
fn leader_address_and_rank_resolve_on_every_grove_release_for_one_and_many_copies() {
    for grove in [Grove::Released, Grove::Prepending] {
        for (copies, workers) in [(1, 1), (3, 1), (3, 3)] {
            let pcs = gang_workload(
                "tests/fixtures/clusters/dynamo/eks-h200-us-east.yaml",
                copies,
                workers,
            );
            let what = format!("Grove {grove:?} copies={copies} workers={workers}");
            assert_gang(&grove_pods(&pcs, grove), copies as usize, workers as usize, &what);
        }
    }
}

#[test]
fn the_model_tells_the_injection_orders_apart() {
    // The form Grove's own docs suggest, written into the template env, only expands where Grove prepends:
    // the model must see the difference, or the test above would prove nothing about order.
    let mut pcs = gang_workload("tests/fixtures/clusters/dynamo/eks-h200-us-east.yaml", 1, 1);
    let docs_form = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-leader-0.$(GROVE_HEADLESS_SERVICE)";
    for clique in pcs["spec"]["template"]["cliques"].as_array_mut().unwrap() {
        clique["spec"]["podSpec"]["containers"][0]["env"][1]["value"] = json!(docs_form);
    }
    let released = grove_pods(&pcs, Grove::Released);
    assert!(
        released[0].2.0.contains("$(GROVE_PCSG_NAME)"),
        "appended variables are not visible: {released:?}"
    );
    let prepending = grove_pods(&pcs, Grove::Prepending);
    assert_eq!(prepending[0].2.0, prepending[0].1);
}
