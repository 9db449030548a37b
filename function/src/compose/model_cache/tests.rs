use serde_json::{Value, json};

use super::compose;
use crate::compose::{
    Output,
    fixtures::{self, request, run, with_observed, with_required},
};
use crate::proto::v1::{RunFunctionRequest, Status};

fn cache(extra_spec: Value) -> Value {
    let mut spec = json!({
        "source": "HuggingFace",
        "huggingFace": {"repo": "Qwen/Qwen3-Coder-480B-A35B-Instruct", "revision": "main", "sizeGiB": 1024},
        "clusterSelector": {"matchLabels": {"region": "us-east"}},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra_spec) {
        spec.extend(extra);
    }
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
           "metadata": {"name": "qwen3-coder", "namespace": "ml-team"}, "spec": spec})
}

fn cluster(name: &str, storage_class: &str) -> Value {
    fixtures::cluster(name)
        .stack("Dynamo")
        .label("region", "us-east")
        .cache_storage_class(storage_class)
        .build()
}

fn resolved(xr: Value, clusters: &[Value]) -> RunFunctionRequest {
    with_required(
        with_required(request(xr), "clusters", clusters),
        "deployments",
        &[],
    )
}

fn manifest<'a>(out: &'a Output, key: &str) -> &'a Value {
    &out.resources[key].object["spec"]["forProvider"]["manifest"]
}

fn condition(out: &Output) -> (Status, &str, &str) {
    let c = out.reported("Staged");
    (c.status, c.reason, c.message.as_deref().unwrap_or_default())
}

#[test]
fn first_call_only_asks_for_clusters_deployments_and_the_auth_secret() {
    let xr = cache(
        json!({"huggingFace": {"repo": "org/m", "sizeGiB": 10, "authSecret": {"name": "hf", "key": "token"}}}),
    );
    let out = run(compose, &request(xr)).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(
        out.requirements.keys().collect::<Vec<_>>(),
        ["auth-secret", "clusters", "deployments"]
    );
    assert_eq!(
        out.requirements["deployments"].namespace.as_deref(),
        Some("ml-team")
    );
}

#[test]
fn selected_cluster_gets_a_shared_volume_and_a_hydration_job() {
    let out = run(compose, &resolved(cache(json!({})), &[cluster("eks-a", "efs")])).unwrap();
    let pvc = manifest(&out, "volume-eks-a");
    assert_eq!(pvc["metadata"]["name"], "modelcache-qwen3-coder");
    assert_eq!(pvc["spec"]["accessModes"], json!(["ReadWriteMany"]));
    assert_eq!(pvc["spec"]["storageClassName"], "efs");
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "1024Gi");
    assert_eq!(
        out.resources["volume-eks-a"].object["spec"]["providerConfigRef"]["name"],
        "eks-a-pc"
    );

    let job = manifest(&out, "hydrate-eks-a");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
    };
    assert_eq!(env("HF_HUB_CACHE").unwrap()["value"], "/mnt/models");
    assert_eq!(
        env("REPO").unwrap()["value"],
        "Qwen/Qwen3-Coder-480B-A35B-Instruct"
    );
    assert_eq!(env("REVISION").unwrap()["value"], "main");
    assert!(env("HF_TOKEN").is_none(), "no token without an auth secret");
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/mnt/models");
    assert_eq!(
        job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        pvc["metadata"]["name"]
    );
    assert_eq!(out.status["clusters"][0]["phase"], "Pending");
    assert_eq!(out.ready, Some(false));
}

#[test]
fn cluster_without_a_cache_storage_class_is_named_in_the_condition() {
    let out = run(compose, &resolved(cache(json!({})), &[cluster("eks-a", "")])).unwrap();
    assert!(out.resources.is_empty());
    let (status, reason, message) = condition(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "Staging"));
    assert!(
        message.contains("eks-a") && message.contains("status.cacheStorageClass"),
        "{message}"
    );
}

#[test]
fn missing_auth_secret_blocks_hydration_and_names_the_secret() {
    let xr = cache(
        json!({"huggingFace": {"repo": "org/m", "sizeGiB": 10, "authSecret": {"name": "hf", "key": "token"}}}),
    );
    let req = with_required(resolved(xr, &[cluster("eks-a", "efs")]), "auth-secret", &[]);
    let out = run(compose, &req).unwrap();
    assert!(out.resources.contains_key("volume-eks-a"));
    assert!(
        !out.resources.contains_key("hydrate-eks-a"),
        "no Job without the token"
    );
    let (status, reason, message) = condition(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "AuthSecretMissing"));
    assert!(message.contains("ml-team/hf"), "{message}");
}

/// A cache of a gated repo, its Hub token in Secret `hf` under key `hf-token`.
fn gated_cache() -> Value {
    cache(
        json!({"huggingFace": {"repo": "org/m", "sizeGiB": 10, "authSecret": {"name": "hf", "key": "hf-token"}}}),
    )
}

/// Secret `hf` in `namespace`, holding the token under `hf-token`.
fn hf_token(namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": namespace},
           "data": {"hf-token": "c2VjcmV0"}})
}

/// Tenancy: another team's Secret of the token's name is not the cache's token; hydration waits for its own, and
/// no reference reads the other namespace.
#[test]
fn another_namespaces_secret_of_the_same_name_is_not_the_token() {
    let xr = gated_cache();
    let req = with_required(
        resolved(xr, &[cluster("eks-a", "efs")]),
        "auth-secret",
        &[hf_token("other-team")],
    );
    let out = run(compose, &req).unwrap();
    assert!(
        !out.resources.contains_key("hydrate-eks-a"),
        "hydrating with another team's token"
    );
    let (status, reason, message) = condition(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "AuthSecretMissing"));
    assert!(message.contains("ml-team/hf"), "{message}");
    let composed =
        serde_json::to_string(&out.resources.values().map(|r| &r.object).collect::<Vec<_>>()).unwrap();
    assert!(!composed.contains("other-team"), "{composed}");
}

#[test]
fn auth_secret_is_propagated_by_reference_not_copied() {
    let xr = gated_cache();
    let req = with_required(
        resolved(xr, &[cluster("eks-a", "efs")]),
        "auth-secret",
        &[hf_token("ml-team")],
    );
    let out = run(compose, &req).unwrap();
    let token = &out.resources["token-eks-a"].object;
    assert!(
        !Value::Object(token.to_map()).to_string().contains("c2VjcmV0"),
        "the token value never passes through the function"
    );
    assert_eq!(
        token["spec"]["references"][0]["patchesFrom"]["fieldPath"],
        "data.hf-token"
    );
    let job = manifest(&out, "hydrate-eks-a").to_string();
    assert!(job.contains("HF_TOKEN"));
}

#[test]
fn completed_job_marks_the_cluster_ready_and_is_dropped() {
    let job_done = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
        "atProvider": {"manifest": {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}}}});
    let volume_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let req = resolved(cache(json!({})), &[cluster("eks-a", "efs")]);
    let req = with_observed(
        with_observed(req, "hydrate-eks-a", &job_done),
        "volume-eks-a",
        &volume_ready,
    );
    let out = run(compose, &req).unwrap();
    assert!(!out.resources.contains_key("hydrate-eks-a"));
    assert!(out.resources["volume-eks-a"].ready);
    assert_eq!(
        out.status["clusters"],
        json!([{"cluster": "eks-a", "phase": "Ready"}])
    );
    assert_eq!(out.ready, Some(true));
}

#[test]
fn ready_cluster_stays_ready_without_its_job() {
    let mut xr = cache(json!({}));
    xr["status"] = json!({"clusters": [{"cluster": "eks-a", "phase": "Ready"}]});
    let out = run(compose, &resolved(xr, &[cluster("eks-a", "efs")])).unwrap();
    assert_eq!(
        out.resources.keys().collect::<Vec<_>>(),
        ["namespace-eks-a", "progress-eks-a", "volume-eks-a"]
    );
    assert_eq!(out.status["clusters"][0]["phase"], "Ready");
    assert_eq!(out.status["stagedPercent"], 100);
}

#[test]
fn failed_job_is_reported_with_its_reason() {
    let failed = json!({"status": {"atProvider": {"manifest": {"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}}}}});
    let req = with_observed(
        resolved(cache(json!({})), &[cluster("eks-a", "efs")]),
        "hydrate-eks-a",
        &failed,
    );
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["clusters"][0]["phase"], "Failed");
    let (_, reason, message) = condition(&out);
    assert_eq!(reason, "HydrationFailed");
    assert!(message.contains("BackoffLimitExceeded"), "{message}");
}

#[test]
fn clusters_where_a_deployment_using_the_cache_runs_get_it_too() {
    let mut xr = cache(json!({}));
    xr["spec"].as_object_mut().unwrap().remove("clusterSelector");
    let deployment = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
        "spec": {"template": {"spec": {"modelCacheRef": {"name": "qwen3-coder"}}}},
        "status": {"replicas": [{"replica": 0, "cluster": "eks-b", "pool": "gpu"}]}});
    let other = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "other", "namespace": "ml-team"},
        "spec": {"template": {"spec": {"modelCacheRef": {"name": "another-cache"}}}},
        "status": {"replicas": [{"replica": 0, "cluster": "eks-a", "pool": "gpu"}]}});
    let req = with_required(
        with_required(
            request(xr),
            "clusters",
            &[cluster("eks-a", "efs"), cluster("eks-b", "efs")],
        ),
        "deployments",
        &[deployment, other],
    );
    let out = run(compose, &req).unwrap();
    assert!(out.resources.contains_key("volume-eks-b"));
    assert!(
        !out.resources.contains_key("volume-eks-a"),
        "eks-a runs only a deployment of another cache"
    );
}

#[test]
fn no_selector_and_no_deployments_stages_nothing() {
    let mut xr = cache(json!({}));
    xr["spec"].as_object_mut().unwrap().remove("clusterSelector");
    let out = run(compose, &resolved(xr, &[cluster("eks-a", "efs")])).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(condition(&out).1, "NoClusters");
}

#[test]
fn a_cache_without_a_size_is_fatal_and_names_the_field() {
    let xr = cache(json!({"huggingFace": {"repo": "org/m", "sizeGiB": 0}}));
    let err = run(compose, &resolved(xr, &[cluster("eks-a", "efs")])).unwrap_err();
    assert_eq!(err.path, "spec.huggingFace.sizeGiB");
}

fn progress_reported(data: Value) -> Value {
    json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
        "atProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap", "data": data}}}})
}

#[test]
fn the_job_runs_the_functions_own_image_with_only_its_progress_to_write() {
    let out = run(compose, &resolved(cache(json!({})), &[cluster("eks-a", "efs")])).unwrap();
    let job = manifest(&out, "hydrate-eks-a");
    let pod = &job["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], crate::workload::well_known::FUNCTION_IMAGE);
    assert_eq!(container["args"], json!(["stage"]));
    assert!(
        !job.to_string().contains("pip"),
        "nothing is installed at run time"
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    // What no retry can fix fails the Job at once.
    assert_eq!(
        job["spec"]["podFailurePolicy"]["rules"][0],
        json!({"action": "FailJob", "onExitCodes": {"containerName": "hydrate", "operator": "In",
               "values": [crate::stage::EXIT_FINAL]}})
    );

    let account = "modelcache-qwen3-coder-stage";
    assert_eq!(pod["serviceAccountName"], account);
    assert_eq!(manifest(&out, "stage-account-eks-a")["metadata"]["name"], account);
    let role = manifest(&out, "stage-role-eks-a");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["modelcache-qwen3-coder-progress"], "verbs": ["get", "patch"]}])
    );
    let binding = manifest(&out, "stage-binding-eks-a");
    assert_eq!(binding["roleRef"]["name"], account);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": account, "namespace": "ml-team"}])
    );
    let env = container["env"].to_string();
    assert!(env.contains("modelcache-qwen3-coder-progress") && env.contains("PROGRESS_NAMESPACE"));

    // The ConfigMap is created once and never overwritten, so the Job's reports stay; ready as composed.
    let progress = &out.resources["progress-eks-a"];
    assert!(progress.ready, "a report not yet written never holds readiness");
    assert_eq!(
        progress.object["spec"]["managementPolicies"],
        json!(["Observe", "Create", "Delete"])
    );
    assert_eq!(
        manifest(&out, "progress-eks-a")["metadata"]["name"],
        "modelcache-qwen3-coder-progress"
    );
}

#[test]
fn reported_progress_reaches_the_clusters_status() {
    let volume_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let running = json!({"status": {"atProvider": {"manifest": {"status": {"active": 1}}}}});
    let report = progress_reported(
        json!({"filesStaged": "3", "filesTotal": "10", "bytesStaged": "250",
        "bytesTotal": "1000", "state": "Downloading", "commit": "c0ffee",
        "lastError": "org/m: file model.safetensors: the Hub answered 429 Too Many Requests"}),
    );
    let req = resolved(cache(json!({})), &[cluster("eks-a", "efs")]);
    let req = with_observed(
        with_observed(req, "volume-eks-a", &volume_ready),
        "hydrate-eks-a",
        &running,
    );
    let out = run(compose, &with_observed(req, "progress-eks-a", &report)).unwrap();
    assert_eq!(
        out.status["clusters"],
        json!([{"cluster": "eks-a", "phase": "Hydrating", "filesStaged": 3, "filesTotal": 10,
                "bytesStaged": 250, "bytesTotal": 1000, "percent": 25, "commit": "c0ffee",
                "lastError": "org/m: file model.safetensors: the Hub answered 429 Too Many Requests"}])
    );
    assert_eq!(out.status["stagedPercent"], 25);
}

#[test]
fn a_failed_job_is_reported_with_what_the_downloader_said() {
    let failed = json!({"status": {"atProvider": {"manifest": {"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "exit code 3"}]}}}}});
    let report = progress_reported(json!({"filesStaged": "0", "filesTotal": "2", "bytesStaged": "0",
        "bytesTotal": "9", "state": "Failed",
        "lastError": "org/m: listing revision \"main\": the Hub answered 401 Unauthorized"}));
    let req = resolved(cache(json!({})), &[cluster("eks-a", "efs")]);
    let out = run(
        compose,
        &with_observed(
            with_observed(req, "hydrate-eks-a", &failed),
            "progress-eks-a",
            &report,
        ),
    )
    .unwrap();
    let (status, reason, message) = condition(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "HydrationFailed"));
    assert!(message.contains("org/m") && message.contains("401"), "{message}");
    assert_eq!(out.status["clusters"][0]["phase"], "Failed");
}

#[test]
fn a_missing_report_never_holds_a_staged_cache_back() {
    let job_done = json!({"status": {"atProvider": {"manifest": {"status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}}}});
    let req = resolved(cache(json!({})), &[cluster("eks-a", "efs")]);
    let out = run(compose, &with_observed(req, "hydrate-eks-a", &job_done)).unwrap();
    assert_eq!(out.ready, Some(true));
    assert_eq!(out.status["stagedPercent"], 100);
    for gone in [
        "hydrate-eks-a",
        "stage-account-eks-a",
        "stage-role-eks-a",
        "stage-binding-eks-a",
    ] {
        assert!(!out.resources.contains_key(gone), "{gone} outlives the download");
    }
}

#[test]
fn a_branch_revision_is_a_condition_naming_the_field_and_a_commit_is_pinned() {
    let out = run(compose, &resolved(cache(json!({})), &[cluster("eks-a", "efs")])).unwrap();
    let pinned = out
        .conditions
        .iter()
        .find(|c| c.type_ == "RevisionPinned")
        .unwrap();
    assert_eq!(
        (pinned.status, pinned.reason),
        (Status::ConditionFalse, "BranchOrTag")
    );
    let message = pinned.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("spec.huggingFace.revision") && message.contains("\"main\""),
        "{message}"
    );

    let commit = "0123456789abcdef0123456789abcdef01234567";
    let xr = cache(json!({"huggingFace": {"repo": "org/m", "revision": commit, "sizeGiB": 10}}));
    let out = run(compose, &resolved(xr, &[cluster("eks-a", "efs")])).unwrap();
    let pinned = out
        .conditions
        .iter()
        .find(|c| c.type_ == "RevisionPinned")
        .unwrap();
    assert_eq!((pinned.status, pinned.reason), (Status::ConditionTrue, "Commit"));
}
