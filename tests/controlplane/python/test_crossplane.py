"""Crossplane in the loop: Crossplane core composes our XRs by calling modelplane-function over mTLS, and
provider-kubernetes applies the composed Objects back into the same API server, which stands in for the workload
cluster an Existing InferenceCluster points at.

Two stand-ins remain, both for components that cannot run here: no kubelet runs, so no pod ever starts (a
LeaderWorkerSet or Service is checked as stored, never as serving); and provider-helm is not running (its charts
come from registries out of reach), so this test marks the cluster's helm Releases Ready the way provider-helm
would once the charts were installed.
"""

from __future__ import annotations

import copy

from kube import REPO_ROOT, describe, load_yaml_documents, wait_for
from workload import (API, OBJECT_API, RELEASE_API, composed_by, conditions, exists, kubeconfig_pointing_back,
                      play_provider_helm, play_trust_manager, tolerating)

EXAMPLES = REPO_ROOT / "examples"
LWS_API = "leaderworkerset.x-k8s.io/v1"
# Crossplane reconciles on watch events (realtime compositions); provider-kubernetes polls every 10 s here.
CONVERGE_SECONDS = 180


def gang_deployment(cluster: dict) -> dict:
    """The seed's two-node gang, without its ModelCache (staging a cache runs a hydration Job, which needs a
    kubelet), tolerating the example cluster's taints."""
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-coder.yaml")[0])
    spec = deployment["spec"]["template"]["spec"]
    spec.pop("modelCacheRef", None)
    spec["tolerations"] = tolerating(cluster)
    return deployment


def test_an_existing_cluster_and_a_gang_deployment_are_composed_applied_and_cleaned_up(platform):
    kube = platform
    cluster = load_yaml_documents(EXAMPLES / "clusters" / "existing-onprem.yaml")[0]
    name = cluster["metadata"]["name"]
    # Upstream's shape: name and key; the Secret lives in modelplane-system unless the ref names a namespace.
    secret_ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    secret_namespace = secret_ref.get("namespace", "modelplane-system")
    kube.ensure_namespace(secret_namespace)
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret_ref["name"], "namespace": secret_namespace},
                "stringData": {secret_ref.get("key", "kubeconfig"): kubeconfig_pointing_back(kube)}})
    for inference_class in load_yaml_documents(EXAMPLES / "classes"):
        kube.apply(inference_class)
    kube.apply(cluster)

    def cluster_now() -> dict | None:
        return kube.get(API, "InferenceCluster", name)

    # Crossplane called the function: the provider configs and the stack's Releases exist.
    releases = wait_for("the InferenceCluster's helm Releases", lambda: composed_by(kube, RELEASE_API, "Release", name),
                        CONVERGE_SECONDS, lambda: str(conditions(cluster_now())))
    # Crossplane applies composed resources one by one: the Releases can land before the ClusterProviderConfig.
    wait_for("the provider-kubernetes ClusterProviderConfig",
             lambda: kube.get(OBJECT_API, "ClusterProviderConfig", name), CONVERGE_SECONDS,
             lambda: str(conditions(cluster_now())))
    assert {r["metadata"]["namespace"] for r in releases} == {"modelplane-system"}

    # Charts are composed in stages (some wait for others), so keep "installing" each new Release as it appears,
    # and publish the cluster gateway's CA as trust-manager would (this API server is the "workload cluster").
    play_trust_manager(kube)

    def installed_and_ready() -> dict | None:
        play_provider_helm(kube, name)
        return conditions(cluster_now()).get("Ready") == "True" and cluster_now()

    ready = wait_for("the InferenceCluster Ready", installed_and_ready, CONVERGE_SECONDS,
                     lambda: str((cluster_now() or {}).get("status")))
    status = ready["status"]
    assert status["stack"] == "Standard"
    assert status["providerConfigName"] == name
    assert [p["name"] for p in status["pools"]] == ["gpu"]
    assert all(c["ready"] for c in status["components"]), status["components"]

    deployment = gang_deployment(cluster)
    namespace, md_name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)

    def deployment_now() -> dict | None:
        return kube.get(API, "ModelDeployment", md_name, namespace)

    def objects_state() -> dict[str, dict[str, str]]:
        return {o["spec"]["forProvider"]["manifest"]["kind"] + "/" + o["metadata"]["name"]: conditions(o)
                for o in composed_by(kube, OBJECT_API, "Object", md_name)}

    objects = wait_for("the ModelDeployment's Objects", lambda: composed_by(kube, OBJECT_API, "Object", md_name),
                       CONVERGE_SECONDS, lambda: str((deployment_now() or {}).get("status")))
    # The workload's pod report is only read (the cluster's pod reporter writes it, and none runs on kwok's nodes):
    # provider-kubernetes must never create it.
    read_only = [o for o in objects if o["spec"].get("managementPolicies") == ["Observe"]]
    assert [o["spec"]["forProvider"]["manifest"]["kind"] for o in read_only] == ["ConfigMap"], read_only
    objects = [o for o in objects if o not in read_only]
    manifests = [o["spec"]["forProvider"]["manifest"] for o in objects]
    kinds = sorted(m["kind"] for m in manifests)
    assert "LeaderWorkerSet" in kinds and "Service" in kinds, kinds
    assert {o["spec"]["providerConfigRef"]["name"] for o in objects} == {name}

    # provider-kubernetes applied every manifest into the API server the kubeconfig points at.
    for manifest in manifests:
        wait_for(f"provider-kubernetes to apply {describe(manifest)}", lambda: exists(kube, manifest),
                 CONVERGE_SECONDS, lambda: str(objects_state()))
    # Every Object synced; each is Ready except the LeaderWorkerSet's, whose readiness is a CEL query on the
    # status the LWS controller would write (no such controller, no kubelet here).
    applied = {o["spec"]["forProvider"]["manifest"]["kind"] + "/" + o["metadata"]["name"] for o in objects}
    wait_for("every Object Synced, and Ready but for the LeaderWorkerSet",
             lambda: all(c.get("Synced") == "True" and (c.get("Ready") == "True" or key.startswith("LeaderWorkerSet/"))
                         for key, c in objects_state().items() if key in applied), CONVERGE_SECONDS,
             lambda: str(objects_state()))
    assert not exists(kube, read_only[0]["spec"]["forProvider"]["manifest"]), "the pod report was created"
    assert kube.list(LWS_API, "LeaderWorkerSet", namespace), "no LeaderWorkerSet stored"

    # Crossplane wrote the function's status onto the XR.
    written = wait_for("the ModelDeployment scheduled", lambda: conditions(deployment_now()).get("Scheduled") == "True"
                       and deployment_now(), CONVERGE_SECONDS, lambda: str((deployment_now() or {}).get("status")))
    assert written["status"]["placedReplicas"] == 1, written["status"]
    assert conditions(written).get("Synced") == "True", written["status"]
    assert conditions(written).get("Ready") == "False", "Ready without a running engine"

    # The placement ledger (docs/scheduling.md): the replica's namespace Object names the cluster in a label and its
    # nodes in an annotation; the InferenceCluster requires its own entries by that label and sums them into its
    # pools' status on its next reconcile.
    ledger = [o for o in objects if ((o["metadata"].get("labels") or {}).get("modelplane.ai/cluster") == name)]
    assert len(ledger) == 1, [o["metadata"]["name"] for o in objects]
    entry = ledger[0]["metadata"]["annotations"]
    assert entry["modelplane.ai/deployment"] == md_name and entry["modelplane.ai/replica"] == "0", entry
    held = dict(part.split("=") for part in entry["modelplane.ai/nodes"].split(","))
    assert held == {"gpu": "2"}, entry  # the gang: a leader and one worker node, 8 GPUs each

    def gpu_pool() -> dict:
        return next(p for p in ((cluster_now() or {}).get("status") or {}).get("pools") or [] if p["name"] == "gpu")

    pool = wait_for("the InferenceCluster to count the replica's nodes", lambda: gpu_pool().get("holders") and gpu_pool(),
                    CONVERGE_SECONDS, lambda: str((cluster_now() or {}).get("status")))
    assert pool["allocatedNodes"] == 2, pool
    assert pool["holders"] == [{"deployment": f"{namespace}/{md_name}", "replica": 0, "nodes": 2}], pool
    assert not (cluster_now()["status"].get("overcommitted") or []), cluster_now()["status"]

    # Deleting the composite removes the Objects (garbage collection); provider-kubernetes then deletes what each
    # applied, except where the Object's management policies leave Delete out (the shared Namespace).
    deletable = [o["spec"]["forProvider"]["manifest"] for o in objects
                 if {"*", "Delete"} & set(o["spec"].get("managementPolicies") or ["*"])]
    kept = [o["spec"]["forProvider"]["manifest"] for o in objects
            if o["spec"]["forProvider"]["manifest"] not in deletable]
    assert any(m["kind"] == "LeaderWorkerSet" for m in deletable), "the LeaderWorkerSet would never be deleted"
    kube.delete(API, "ModelDeployment", md_name, namespace)
    wait_for("the ModelDeployment's Objects removed", lambda: not composed_by(kube, OBJECT_API, "Object", md_name),
             CONVERGE_SECONDS)
    wait_for("the ModelDeployment's manifests removed", lambda: not any(exists(kube, m) for m in deletable),
             CONVERGE_SECONDS, lambda: str([describe(m) for m in deletable if exists(kube, m)]))
    assert all(exists(kube, m) for m in kept), [describe(m) for m in kept if not exists(kube, m)]
    # The ledger entry went with its Object: the cluster frees the nodes on its next reconcile.
    wait_for("the InferenceCluster to free the replica's nodes", lambda: not gpu_pool().get("holders"),
             CONVERGE_SECONDS, lambda: str(gpu_pool()))
    assert gpu_pool().get("allocatedNodes", 0) == 0, gpu_pool()

    kube.delete(API, "InferenceCluster", name)
    wait_for("the InferenceCluster's Releases removed", lambda: not composed_by(kube, RELEASE_API, "Release", name),
             CONVERGE_SECONDS)
    wait_for("the InferenceCluster removed", lambda: cluster_now() is None, CONVERGE_SECONDS)
    # The stack's namespace is shared (here with the control plane itself: this API server is the "workload
    # cluster"), so the teardown leaves it, and the kubeconfig Secret in it, alone.
    assert (kube.get("v1", "Namespace", "modelplane-system") or {}).get("status", {}).get("phase") == "Active"
    assert kube.get("v1", "Secret", secret_ref["name"], secret_namespace) is not None
