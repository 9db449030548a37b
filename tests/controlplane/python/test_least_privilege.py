"""What the installed packages may do on the control plane (package/README.md, "What each package may do"), the
third file of the install step, on install_step.py's installation after test_install.py and test_upgrade.py.

- provider-eks runs from its package on the real node (its DeploymentRuntimeConfig, examples/install/
  12-provider-eks-rbac.yaml, given the real node's selector and toleration, as the Function's is), as the
  ServiceAccount that runtime config names, which Crossplane's package manager makes. It is bound to exactly two
  ClusterRoles (besides the one Kubernetes binds every ServiceAccount): the one Crossplane's RBAC manager made for
  its revision and the one the example ships. Crossplane's lacks the three rules the shipped one holds, and the two
  together allow what the provider does (read as it uses the API: provider-eks/src) and refuse what it does not,
  asked of the API server's authorizer as SubjectAccessReviews. What Crossplane grants every provider beyond that
  is named as Crossplane's.
- The Function's ServiceAccount, which Crossplane also makes, is bound to nothing (but that one): its server never
  calls the API server.
- One shipped rule withheld (listing ManagedResourceDefinitions), the provider, restarted, logs the API server's
  refusal naming the verb, resource, group and account, and starts no controller for a kind activated meanwhile;
  the rule restored, it starts that kind's controller, which reconciles a resource and records its Event through
  events.k8s.io (another shipped rule).
"""

from __future__ import annotations

import json

import pytest

import xpkgs
from install_step import (FUNCTION_OBJECT, INSTALL_SECONDS, NAMESPACE, PKG, POD_SECONDS, Installed, conditions,
                          deployment_pods, is_true, on_real_node, patch_runtime_config, revision_of, wait_installed,
                          wait_on_real_node)
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from real_nodes import pod_log

PROVIDER_EKS = xpkgs.object_name(xpkgs.PROVIDER_EKS)
RBAC = REPO_ROOT / "examples" / "install" / "12-provider-eks-rbac.yaml"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:provider-eks"
EKS = "eks.m.modelplane.ai"
MRD = ("apiextensions.crossplane.io", "managedresourcedefinitions")
# A namespace a team's managed resources live in, and the ClusterProviderConfig no one made.
TEAM = "least-privilege"
NO_CONFIG = "least-privilege-missing"
# provider-eks' watches retry a refused list with kube-runtime's backoff (at most 30 s between two).
RETRY_SECONDS = 120
# Kubernetes' bootstrap policy binds this to every ServiceAccount (the group system:serviceaccounts).
EVERY_ACCOUNTS = {"ClusterRole system:service-account-issuer-discovery"}


def account_of(namespace: str, name: str) -> tuple[str, list[str]]:
    return (f"system:serviceaccount:{namespace}:{name}",
            ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"])


def allowed(kube: Kube, account: tuple[str, list[str]], verb: str, group: str, resource: str,
            namespace: str | None = None) -> bool:
    """The API server's authorizer on `verb` of `resource` (`plural` or `plural/subresource`) for a ServiceAccount,
    as `kubectl auth can-i --as` asks it: a SubjectAccessReview."""
    plural, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": plural, "subresource": subresource}
    if namespace:
        attributes["namespace"] = namespace
    user, groups = account
    review = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                          body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                "spec": {"user": user, "groups": groups, "resourceAttributes": attributes}})
    return bool(review["status"].get("allowed"))


def refused_or_granted(kube: Kube, account: tuple[str, list[str]], asks: list[tuple]) -> tuple[list, list]:
    """Of `asks` (verb, group, resource[, namespace]), those refused and those granted."""
    answers = [(ask, allowed(kube, account, *ask)) for ask in asks]
    return [a for a, ok in answers if not ok], [a for a, ok in answers if ok]


def bound_roles(kube: Kube, namespace: str, name: str) -> set[str]:
    """Every (Cluster)Role a (Cluster)RoleBinding gives the ServiceAccount, or its groups, but EVERY_ACCOUNTS."""
    subjects = {("ServiceAccount", name, namespace), ("Group", "system:serviceaccounts", None),
                ("Group", f"system:serviceaccounts:{namespace}", None)}
    bindings = kube.list("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") + \
        kube.list("rbac.authorization.k8s.io/v1", "RoleBinding")
    return {f"{b['roleRef']['kind']} {b['roleRef']['name']}" for b in bindings
            if any((s["kind"], s["name"], s.get("namespace")) in subjects for s in b.get("subjects") or [])} - \
        EVERY_ACCOUNTS


def covers(rules: list[dict], verb: str, group: str, resource: str) -> bool:
    return any(group in r.get("apiGroups", []) and {resource, "*"} & set(r.get("resources", []))
               and {verb, "*"} & set(r.get("verbs", [])) for r in rules)


def shipped() -> tuple[dict, dict, dict]:
    config, role, binding = load_yaml_documents(RBAC)
    return config, role, binding


def provider_pod(kube: Kube) -> dict:
    return wait_on_real_node(kube, revision_of(kube, "ProviderRevision", PROVIDER_EKS)["metadata"]["name"])


@pytest.fixture(scope="module")
def provider_eks(installed: Installed) -> dict:
    """examples/install/12-provider-eks-rbac.yaml applied (its runtime config with the real node's selector and
    toleration) and the patch it names: provider-eks' pod on the real node, Healthy. Returns the pod."""
    kube = installed.kube
    wait_installed(installed)
    config, role, binding = shipped()
    config["spec"]["deploymentTemplate"] = {"spec": {"selector": {}}}
    for obj in (on_real_node(config), role, binding):
        kube.apply(obj)
    patch_runtime_config(kube, "Provider", PROVIDER_EKS, config["metadata"]["name"])
    pod = provider_pod(kube)
    wait_for("provider-eks Healthy on the real node",
             lambda: is_true(kube.get(PKG, "Provider", PROVIDER_EKS), "Installed", "Healthy"), INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Provider", PROVIDER_EKS)))
    return pod


# What provider-eks does with the API (provider-eks/src): its kinds read, watched and written with their status and
# finalizers, its ProviderConfigUsages created and deleted, its ProviderConfigs' finalizers, a credentials Secret
# read and connection Secrets written in a resource's namespace, the leader Lease in its own, Events through
# events.k8s.io, and (SafeStart) ManagedResourceDefinitions and CRDs watched.
KINDS = ("clusters", "nodepools", "networks", "roles", "addons", "podidentityassociations", "filesystems")
NEEDED = [
    *[(verb, EKS, kind) for kind in KINDS for verb in ("list", "watch")],
    *[(verb, EKS, kind, TEAM) for kind in KINDS for verb in ("get", "patch")],
    ("patch", EKS, "clusters/status", TEAM), ("update", EKS, "clusters/finalizers", TEAM),
    *[(verb, EKS, "providerconfigusages", TEAM) for verb in ("create", "get", "patch", "delete")],
    ("watch", EKS, "providerconfigusages"), ("get", EKS, "providerconfigs", TEAM),
    ("patch", EKS, "providerconfigs", TEAM),
    ("get", EKS, "clusterproviderconfigs"), ("watch", EKS, "clusterproviderconfigs"),
    ("patch", EKS, "clusterproviderconfigs"),
    *[(verb, "", "secrets", TEAM) for verb in ("get", "create", "patch", "delete")],
    *[(verb, "coordination.k8s.io", "leases", NAMESPACE) for verb in ("get", "create", "patch")],
    ("create", "events.k8s.io", "events", TEAM), ("patch", "events.k8s.io", "events", TEAM),
    ("list", *MRD), ("watch", *MRD),
    ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("watch", "apiextensions.k8s.io", "customresourcedefinitions"),
]
# What it never does: delete or create its own resources (Crossplane and users do), activate its kinds, change
# CRDs, touch another provider's kinds, our composites or packages, run workloads, grant itself more, or read
# Events back.
NOT_NEEDED = [
    ("delete", EKS, "clusters", TEAM), ("deletecollection", EKS, "nodepools", TEAM),
    ("patch", *MRD), ("update", *MRD), ("create", *MRD),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("patch", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("get", "kubernetes.m.crossplane.io", "objects", TEAM), ("list", "kubernetes.m.crossplane.io", "objects"),
    ("list", "helm.m.crossplane.io", "releases"), ("create", "ec2.aws.m.upbound.io", "vpcs", TEAM),
    ("get", "modelplane.ai", "inferenceclusters"), ("patch", "modelplane.ai", "modeldeployments", TEAM),
    ("patch", "pkg.crossplane.io", "providers"),
    ("create", "apiextensions.crossplane.io", "managedresourceactivationpolicies"),
    ("create", "", "pods", NAMESPACE), ("create", "apps", "deployments", NAMESPACE),
    ("create", "", "serviceaccounts/token", NAMESPACE), ("create", "rbac.authorization.k8s.io", "clusterroles"),
    ("bind", "rbac.authorization.k8s.io", "clusterroles"), ("escalate", "rbac.authorization.k8s.io", "clusterroles"),
    ("list", "events.k8s.io", "events"), ("delete", "events.k8s.io", "events", TEAM), ("list", "", "nodes"),
]
# Crossplane's RBAC manager grants every provider every verb on Secrets, ConfigMaps, core Events and Leases,
# cluster-wide, and create and update on its own kinds; provider-eks needs only what NEEDED names of them. Not ours
# to narrow: RBAC only adds.
CROSSPLANES_BROAD_GRANT = [
    ("list", "", "secrets"), ("watch", "", "secrets"), ("delete", "", "secrets", "kube-system"),
    ("create", "", "configmaps", TEAM), ("create", "", "events", TEAM),
    ("delete", "coordination.k8s.io", "leases", "kube-system"), ("create", EKS, "clusters", TEAM),
]


def test_provider_eks_holds_what_it_uses_and_no_more(installed: Installed, provider_eks: dict):
    kube = installed.kube
    assert provider_eks["spec"]["serviceAccountName"] == "provider-eks", provider_eks["spec"]
    revision = revision_of(kube, "ProviderRevision", PROVIDER_EKS)["metadata"]["name"]
    crossplanes = f"crossplane:provider:{revision}:system"
    _, role, _ = shipped()
    roles = {f"ClusterRole {crossplanes}", f"ClusterRole {role['metadata']['name']}"}
    # Crossplane's RBAC manager binds its role to the account of the revision's Deployment once it sees it.
    wait_for("provider-eks' account bound to Crossplane's role and ours",
             lambda: bound_roles(kube, NAMESPACE, "provider-eks") == roles, INSTALL_SECONDS,
             lambda: str(bound_roles(kube, NAMESPACE, "provider-eks")))
    # Each shipped rule is one Crossplane's role lacks, and the shipped role holds nothing else.
    granted = kube.get("rbac.authorization.k8s.io/v1", "ClusterRole", crossplanes)["rules"]
    ours = [(verb, group, resource) for r in role["rules"] for group in r["apiGroups"]
            for resource in r["resources"] for verb in r["verbs"]]
    assert ours == [("list", *MRD), ("watch", *MRD), ("create", "events.k8s.io", "events"),
                    ("patch", "events.k8s.io", "events"), ("delete", EKS, "providerconfigusages")]
    assert not [ask for ask in ours if covers(granted, *ask)], granted

    account = account_of(NAMESPACE, "provider-eks")
    refused, _ = refused_or_granted(kube, account, NEEDED)
    assert not refused, f"provider-eks is refused what it does: {refused}"
    _, granted_too = refused_or_granted(kube, account, NOT_NEEDED)
    assert not granted_too, f"provider-eks may do what it never does: {granted_too}"
    refused, _ = refused_or_granted(kube, account, CROSSPLANES_BROAD_GRANT)
    assert not refused, f"Crossplane no longer grants providers {refused}: say so in package/README.md"


def test_the_function_account_is_bound_to_nothing(installed: Installed):
    """The Function's pod runs as the ServiceAccount Crossplane made for its revision, which no binding names: the
    function's server never calls the API server (only the `report-pods` and `stage` subcommands do, on workload
    clusters, under RBAC their own manifests grant)."""
    kube = installed.kube
    wait_installed(installed)
    revision = revision_of(kube, "FunctionRevision", FUNCTION_OBJECT)["metadata"]["name"]
    [pod] = deployment_pods(kube, revision)
    name = pod["spec"]["serviceAccountName"]
    assert kube.get("v1", "ServiceAccount", name, NAMESPACE), f"no ServiceAccount {name}"
    assert not bound_roles(kube, NAMESPACE, name), bound_roles(kube, NAMESPACE, name)
    refused, granted = refused_or_granted(kube, account_of(NAMESPACE, name), [
        ("get", "", "secrets", NAMESPACE), ("list", "", "secrets"), ("list", "", "pods"),
        ("create", "", "events", NAMESPACE), ("create", "events.k8s.io", "events", NAMESPACE),
        ("get", "modelplane.ai", "inferenceclusters"), ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
        ("get", "coordination.k8s.io", "leases", NAMESPACE)])
    assert not granted, f"the function's ServiceAccount may {granted}"


def log_lines(kube: Kube, pod: dict) -> list[dict]:
    """The provider's log, one JSON object a line (tracing's JSON format); anything else is kept as its text."""
    lines = []
    for line in pod_log(kube, NAMESPACE, pod["metadata"]["name"]).splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"fields": {"message": line}})
    return lines


def refusals(lines: list[dict]) -> list[dict]:
    """The lines quoting the API server's refusal to list ManagedResourceDefinitions to provider-eks' account."""
    words = (f'User "{ACCOUNT}" cannot list resource "{MRD[1]}" in API group "{MRD[0]}" at the cluster scope')
    return [line for line in lines if words in (line.get("fields") or {}).get("error", "")]


def started(lines: list[dict], kind: str) -> bool:
    return any((line.get("fields") or {}).get("kind") == kind and "starting controller" in
               line["fields"].get("message", "") for line in lines)


def restarted(kube: Kube, pod: dict) -> dict:
    """Deletes the provider's pod and returns its successor, Ready on the real node."""
    kube.delete("v1", "Pod", pod["metadata"]["name"], NAMESPACE)

    def successor() -> dict | None:
        now = provider_pod(kube)
        return now if now["metadata"]["uid"] != pod["metadata"]["uid"] else None

    return wait_for("provider-eks' next pod", successor, POD_SECONDS)


def test_a_withheld_rule_is_refused_by_name_and_restoring_it_recovers(installed: Installed, provider_eks: dict):
    """The shipped role without its rule on ManagedResourceDefinitions, and the provider restarted (a running watch
    is not authorized again): the provider logs the refusal in the API server's words and starts no controller for
    a kind activated meanwhile. The rule restored, the same process starts it, and it reconciles."""
    kube = installed.kube
    _, role, _ = shipped()
    withheld = {**role, "rules": [r for r in role["rules"] if r["resources"] != [MRD[1]]]}
    assert len(withheld["rules"]) == len(role["rules"]) - 1
    kube.apply(withheld)
    account = account_of(NAMESPACE, "provider-eks")
    wait_for("the authorizer refusing the withheld rule", lambda: not allowed(kube, account, "list", *MRD),
             RETRY_SECONDS)
    pod = restarted(kube, provider_eks)
    lines = wait_for("provider-eks logging the API server's refusal", lambda: refusals(log_lines(kube, pod)),
                     RETRY_SECONDS, lambda: str(log_lines(kube, pod)[-5:]))
    assert lines[0]["level"] == "WARN", lines[0]

    # One of its kinds activated meanwhile (as an EKS InferenceCluster's composition does): its definition Active
    # and CRD served, yet a refusal logged after that, and no controller started.
    network = f"networks.{EKS}"
    kube.apply({"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
                "metadata": {"name": TEAM}, "spec": {"activate": [network]}})

    def served() -> dict | None:
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", network)
        return crd if is_true(crd, "Established") else None

    crd = wait_for(f"CRD {network} Established", served, INSTALL_SECONDS)
    assert kube.get("apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", network)["spec"][
        "state"] == "Active"
    established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"][0]["lastTransitionTime"]
    later = wait_for("a refusal logged after the CRD was served", lambda: [
        line for line in refusals(log_lines(kube, pod)) if line["timestamp"][:19] > established[:19]],
        RETRY_SECONDS)
    assert not started(log_lines(kube, pod), "Network"), later

    kube.apply(role)
    wait_for("provider-eks starting the Network controller once the rule is back",
             lambda: started(log_lines(kube, pod), "Network"), RETRY_SECONDS,
             lambda: str(log_lines(kube, pod)[-5:]))
    assert pod["metadata"]["uid"] == provider_pod(kube)["metadata"]["uid"], "the provider restarted to recover"
    reconciles_and_records_events(kube)


def reconciles_and_records_events(kube: Kube) -> None:
    """A Network naming a ClusterProviderConfig no one made: the controller tracks its usage of it, says in Synced
    why it waits, and records that as an Event through events.k8s.io (the shipped rule)."""
    kube.ensure_namespace(TEAM)
    network = {"apiVersion": f"{EKS}/v1alpha1", "kind": "Network", "metadata": {"name": "lp", "namespace": TEAM},
               "spec": {"providerConfigRef": {"kind": "ClusterProviderConfig", "name": NO_CONFIG},
                        "forProvider": {"region": "us-east-1", "cidrBlock": "10.0.0.0/16",
                                        "zones": ["us-east-1a", "us-east-1b"]}}}
    kube.apply(network)

    def synced() -> dict | None:
        now = kube.get(network["apiVersion"], "Network", "lp", TEAM)
        message = [c for c in ((now or {}).get("status") or {}).get("conditions") or []
                   if c["type"] == "Synced" and c["status"] == "False"]
        return now if message and f"cannot get ClusterProviderConfig {NO_CONFIG}" in message[0]["message"] else None

    now = wait_for("the Network saying which config it waits for", synced, RETRY_SECONDS,
                   lambda: conditions(kube.get(network["apiVersion"], "Network", "lp", TEAM)))
    uid = now["metadata"]["uid"]
    usage = kube.get(f"{EKS}/v1alpha1", "ProviderConfigUsage", uid, TEAM)
    assert usage and usage["spec"]["providerConfigRef"]["name"] == NO_CONFIG, usage

    def recorded() -> list[dict]:
        return [e for e in kube.list("events.k8s.io/v1", "Event", TEAM)
                if e.get("regarding", {}).get("uid") == uid and e.get("reportingController") ==
                "modelplane-provider-eks"]

    events = wait_for("provider-eks' Event on the Network", recorded, RETRY_SECONDS)
    assert all(NO_CONFIG in e["note"] for e in events), events
    kube.delete(network["apiVersion"], "Network", "lp", TEAM)
    wait_for("the Network gone", lambda: not kube.get(network["apiVersion"], "Network", "lp", TEAM), RETRY_SECONDS)
