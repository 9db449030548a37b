"""The manifest validator itself: it must pass what an API server accepts and name what it would refuse."""

import copy

import pytest

import manifests

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "vllm", "namespace": "models", "labels": {"app.kubernetes.io/name": "vllm"}},
    "spec": {
        # Numbers come back from google.protobuf.Struct as doubles; the API server reads 1.0 as the integer 1.
        "replicas": 1.0,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "vllm"}},
            "spec": {
                "containers": [{
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.11.0",
                    "ports": [{"containerPort": 8000, "name": "http"}],
                    "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "64Gi"}},
                }],
            },
        },
    },
}

LEADER_WORKER_SET = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "llama", "namespace": "models"},
    "spec": {
        "replicas": 1,
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {
            "size": 2,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": {"spec": {"containers": [{"name": "worker", "image": "vllm/vllm-openai:v0.11.0"}]}},
        },
    },
}

PROVIDER_KUBERNETES_OBJECT = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "Object",
    "metadata": {"name": "vllm"},
    "spec": {"forProvider": {"manifest": DEPLOYMENT}, "providerConfigRef": {"name": "cluster-a"}},
}


def with_change(obj, change):
    changed = copy.deepcopy(obj)
    change(changed)
    return changed


def test_a_valid_deployment_passes():
    assert manifests.validate(DEPLOYMENT) == []


def test_a_misspelt_deployment_field_is_named():
    bad = with_change(DEPLOYMENT, lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
        imagePullPolicyy="Always"))
    assert manifests.validate(bad) == ["spec.template.spec.containers[0].imagePullPolicyy: unknown field"]


def test_a_wrongly_typed_deployment_field_is_named():
    bad = with_change(DEPLOYMENT, lambda d: d["spec"].update(replicas="one"))
    errors = manifests.validate(bad)
    assert len(errors) == 1 and errors[0].startswith("spec.replicas: 'one'")


def test_a_resource_claim_template_in_resource_k8s_io_v1_passes():
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpus", "namespace": "models"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}},
        ]}}},
    }
    assert manifests.validate(template) == []
    # v1beta1 requests had deviceClassName at the top; v1 moved it under `exactly`.
    old_shape = with_change(template, lambda t: t["spec"]["spec"]["devices"]["requests"][0].update(
        deviceClassName="gpu.nvidia.com"))
    assert manifests.validate(old_shape) == ["spec.spec.devices.requests[0].deviceClassName: unknown field"]


def test_an_invalid_service_name_is_named():
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "7-llama"},
               "spec": {"ports": [{"port": 80, "targetPort": "http"}]}}
    assert manifests.validate(service)[0].startswith("metadata.name: '7-llama' is not a DNS-1035 label")


def test_an_invalid_label_value_is_named():
    bad = with_change(DEPLOYMENT, lambda d: d["metadata"]["labels"].update(pool="gpu pool"))
    assert manifests.validate(bad) == ["metadata.labels.pool: value 'gpu pool' is not a valid label value"]


def test_a_sub_type_is_not_mistaken_for_a_kind():
    errors = manifests.validate({"apiVersion": "apps/v1", "kind": "DeploymentSpec"})
    assert errors and "no schema is known for DeploymentSpec" in errors[0]


def test_an_unknown_kind_is_an_error_not_a_pass():
    errors = manifests.validate({"apiVersion": "example.org/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert len(errors) == 1 and "no schema is known for Widget" in errors[0]


def test_a_valid_leader_worker_set_passes():
    assert manifests.validate(LEADER_WORKER_SET) == []


def test_a_leader_worker_set_with_a_wrong_type_fails():
    bad = with_change(LEADER_WORKER_SET, lambda o: o["spec"]["leaderWorkerTemplate"].update(size="two"))
    assert manifests.validate(bad) == ["spec.leaderWorkerTemplate.size: 'two' is not of type 'integer'"]


def test_a_leader_worker_set_field_the_crd_does_not_declare_is_flagged():
    bad = with_change(LEADER_WORKER_SET, lambda o: o["spec"].update(startupType="LeaderReady"))
    assert manifests.validate(bad) == [
        "spec.startupType: field is not declared in the schema (the API server would drop it)"]


def test_a_misspelt_field_inside_an_embedded_pod_template_is_flagged():
    bad = with_change(LEADER_WORKER_SET, lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
                      ["containers"][0].update(imagee="x"))
    errors = manifests.validate(bad)
    assert errors == ["spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagee: field is not declared "
                      "in the schema (the API server would drop it)"]


def test_a_wrong_custom_resource_version_names_the_served_ones():
    bad = with_change(LEADER_WORKER_SET, lambda o: o.update(apiVersion="leaderworkerset.x-k8s.io/v2"))
    assert manifests.validate(bad) == [
        "apiVersion: LeaderWorkerSet is served as leaderworkerset.x-k8s.io/v1, not leaderworkerset.x-k8s.io/v2"]


def test_a_pod_clique_set_is_checked_against_every_grove_release_we_ship():
    pcs = {
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {"name": "llama", "namespace": "models"},
        "spec": {"replicas": 1, "template": {"cliques": [{"name": "worker", "spec": {
            "roleName": "worker", "replicas": 2,
            "podSpec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]}}}]}},
    }
    assert manifests.validate(pcs) == []
    bad = with_change(pcs, lambda p: p["spec"]["template"]["cliques"][0]["spec"].pop("roleName"))
    errors = manifests.validate(bad)
    releases = {e.split("]")[0] + "]" for e in errors}
    assert len(errors) == len(releases) >= 2, errors
    assert all("spec.template.cliques[0].spec: 'roleName' is a required property" in e for e in errors)


def test_a_kai_queue_is_cluster_scoped():
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "inference"},
             "spec": {"resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1}
                                    for r in ("gpu", "cpu", "memory")}}}
    assert manifests.validate(queue) == []
    namespaced = with_change(queue, lambda q: q["metadata"].update(namespace="models"))
    assert manifests.validate(namespaced) == [
        "metadata.namespace: Queue is cluster-scoped; it cannot have a namespace"]


def test_metadata_of_a_custom_resource_is_checked_as_object_meta():
    bad = with_change(LEADER_WORKER_SET, lambda o: o["metadata"].update(label={"a": "b"}))
    assert manifests.validate(bad) == ["metadata.label: unknown field"]


def test_the_rewrite_gives_int_or_string_and_nullable_their_api_server_meaning():
    schema = {"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": True},
        "role": {"type": "string", "nullable": True, "enum": ["a"]},
        "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
    }}
    validator = manifests.jsonschema.Draft7Validator(manifests._to_json_schema(schema))
    assert validator.is_valid({"port": 8000, "role": None, "blob": {"anything": [1]}, "weight": 0.5})
    assert validator.is_valid({"port": "http"})
    assert not validator.is_valid({"port": True})
    assert not validator.is_valid({"role": "b"})
    assert not validator.is_valid({"weight": 0})
    undeclared = list(manifests._undeclared_fields({"blob": {"x": 1}, "extra": 1}, schema, ""))
    assert undeclared == ["extra: field is not declared in the schema (the API server would drop it)"]


def test_unwrap_returns_the_manifest_of_a_provider_kubernetes_object():
    assert manifests.unwrap(PROVIDER_KUBERNETES_OBJECT) == DEPLOYMENT
    assert manifests.unwrap_all([PROVIDER_KUBERNETES_OBJECT, LEADER_WORKER_SET]) == [DEPLOYMENT, LEADER_WORKER_SET]
    with pytest.raises(ValueError, match="not a provider-kubernetes Object"):
        manifests.unwrap(DEPLOYMENT)
    with pytest.raises(ValueError, match="no spec.forProvider.manifest"):
        manifests.unwrap(with_change(PROVIDER_KUBERNETES_OBJECT, lambda o: o["spec"]["forProvider"].clear()))
