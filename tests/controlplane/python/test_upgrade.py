"""Another release of the installed packages, and back; a release that cannot start; bad input (README, "Install
into Crossplane", and package/README.md, "Moving to a new release"). The second file of the install step, on the
installation of install_step.py that test_install.py made and composed through (an Existing cluster and a
ModelDeployment, Ready): it runs after test_install.py in the same pytest invocation (tests/run.sh).
"""

from __future__ import annotations

import yaml

import xpkgs
from install_step import (CONVERGE_SECONDS, EXISTING_CLUSTER, FUNCTION_OBJECT, INSTALL_SECONDS, NAMESPACE, PKG,
                          POD_SECONDS, Installed, active_revisions, condition, conditions, deployment_pods,
                          function_endpoints, is_true, patch_spec, revision_of, said_false, wait_installed,
                          wait_on_real_node)
from installs import function_binary
from kube import Kube, describe, wait_for
from test_scheduling import engine_pods
from workload import API, OBJECT_API, resource_refs


def release_after(version: str, step: int) -> str:
    major, minor, patch = version.lstrip("v").split(".")
    return f"v{major}.{minor}.{int(patch) + step}"


# The next release of both packages, and a release of the Function whose image cannot start.
NEXT = release_after(xpkgs.VERSION, 1)
CRASHING = release_after(xpkgs.VERSION, 2)
# The packages a release moves, with their revisions' kind.
RELEASED = (("Configuration", "modelplane", "ConfigurationRevision"), ("Function", FUNCTION_OBJECT, "FunctionRevision"))


def composites(kube: Kube) -> list[dict]:
    """What test_an_existing_cluster_and_a_model_deployment_become_ready_through_it composed: the Existing cluster
    and the one ModelDeployment."""
    deployments = [{"apiVersion": API, "kind": "ModelDeployment", **d} for d in kube.list(API, "ModelDeployment")]
    assert len(deployments) == 1, [describe(d) for d in deployments]
    cluster = kube.get(API, "InferenceCluster", EXISTING_CLUSTER)
    assert cluster, f"no InferenceCluster {EXISTING_CLUSTER}: the test composing it did not run"
    return [cluster] + deployments


def made_by_composing(kube: Kube) -> dict[str, dict]:
    """What composing the composites made: every composed object (spec.crossplane.resourceRefs, and in turn what
    the ModelEndpoints among them compose), every object those Objects applied into the cluster, every engine
    pod."""
    made: dict[str, dict] = {}
    pending = composites(kube)
    while pending:
        composite = pending.pop()
        for ref in resource_refs(composite):
            obj = kube.get(ref["apiVersion"], ref["kind"], ref["name"], ref["namespace"])
            assert obj, f"{describe(composite)} refers to {ref}, which does not exist"
            made[describe(obj)] = obj
            if obj["apiVersion"] == API:
                pending.append(obj)
            elif (obj["apiVersion"], obj["kind"]) == (OBJECT_API, "Object"):
                manifest = obj["spec"]["forProvider"]["manifest"]
                applied = kube.get(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"],
                                   manifest["metadata"].get("namespace"))
                if applied:
                    made["applied " + describe(applied)] = applied
    for deployment in kube.list(API, "ModelDeployment"):
        for pod in engine_pods(kube, deployment["metadata"]["namespace"], deployment["metadata"]["name"]):
            made[f"engine Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
    return made


def fingerprint(obj: dict | None) -> tuple | None:
    """What changes when an object is deleted or recreated (its UID) or, for a pod, moved (its node). Not the
    generation: the InferenceCluster's two inference-extension CRD Objects are rewritten on its ordinary
    reconciles, with or without a new release (their generation climbs while nothing moves)."""
    if obj is None:
        return None
    return obj["metadata"]["uid"], (obj.get("spec") or {}).get("nodeName")


def assert_nothing_moved(kube: Kube, before: dict[str, dict]) -> None:
    after = made_by_composing(kube)
    changed = {k: (fingerprint(v), fingerprint(after.get(k))) for k, v in before.items()
               if fingerprint(after.get(k)) != fingerprint(v)}
    added = sorted(set(after) - set(before))
    assert not changed and not added, f"changed (before, after): {changed}; added: {added}"


def composed_at(kube: Kube, composite: dict, generation: int) -> dict | None:
    """The composite once Crossplane has reconciled its `generation` (its Synced condition observed it)."""
    meta = composite["metadata"]
    now = kube.get(composite["apiVersion"], composite["kind"], meta["name"], meta.get("namespace"))
    return now if condition(now, "Synced").get("observedGeneration") == generation else None


def touch(kube: Kube, composite: dict) -> int:
    """Changes the composite's spec where only Crossplane reads it (spec.crossplane.compositionUpdatePolicy, between
    Automatic and Manual: the Composition has one revision), so that Crossplane composes it again, through the
    function; returns the generation that makes."""
    meta = composite["metadata"]
    policy = composite["spec"]["crossplane"].get("compositionUpdatePolicy", "Automatic")
    other = "Manual" if policy == "Automatic" else "Automatic"
    patched = patch_spec(kube, composite["apiVersion"], composite["kind"], meta["name"],
                         {"crossplane": {"compositionUpdatePolicy": other}}, meta.get("namespace"))
    return patched["metadata"]["generation"]


def composed_again(kube: Kube) -> None:
    """Touches every composite and waits until Crossplane composed that generation through the function: Synced
    and Ready."""
    for composite in composites(kube):
        generation = touch(kube, composite)
        now = wait_for(f"{describe(composite)} composed at generation {generation}",
                       lambda: composed_at(kube, composite, generation), CONVERGE_SECONDS,
                       lambda: conditions(kube.get(composite["apiVersion"], composite["kind"],
                                                   composite["metadata"]["name"],
                                                   composite["metadata"].get("namespace"))))
        assert is_true(now, "Synced", "Ready"), f"{describe(composite)}: {conditions(now)}"


def function_image(installed: Installed, version: str) -> str:
    return f"{installed.registry.address}/{xpkgs.loopback_path(xpkgs.FUNCTION)}:{version}"


def released(installed: Installed, version: str, previous: dict[str, str]) -> dict[str, str]:
    """Waits until each package `previous` names a revision of (revision kind -> name) runs `version`: Installed
    and Healthy from that release through an active revision other than that one, healthy; the
    Function's pod Ready on the real node from that release's image, its Service's only endpoint, the previous
    revision's Deployment gone. Returns the revisions."""
    kube = installed.kube

    def on_release(kind: str, name: str, revision_kind: str) -> dict | None:
        package = kube.get(PKG, kind, name)
        revisions = active_revisions(kube, revision_kind, name)
        if not (is_true(package, "Installed", "Healthy") and len(revisions) == 1 and
                package["status"].get("resolvedPackage", "").endswith(f":{version}") and
                revisions[0]["metadata"]["name"] != previous.get(revision_kind) and
                is_true(revisions[0], "RevisionHealthy")):
            return None
        return revisions[0]

    revisions = {}
    for kind, name, revision_kind in (r for r in RELEASED if r[2] in previous):
        revisions[revision_kind] = wait_for(
            f"{kind} {name} Healthy at {version} through a new revision",
            lambda: on_release(kind, name, revision_kind), INSTALL_SECONDS,
            lambda: conditions(kube.get(PKG, kind, name)))["metadata"]["name"]
    function_revision = revisions["FunctionRevision"]
    assert is_true(kube.get(PKG, "FunctionRevision", function_revision), "RuntimeHealthy")
    pod = wait_on_real_node(kube, function_revision)
    [container] = pod["status"]["containerStatuses"]
    assert container["image"] == function_image(installed, version), container
    assert container["restartCount"] == 0, container
    wait_for("the previous revision's Deployment gone", lambda: not kube.get(
        "apps/v1", "Deployment", previous["FunctionRevision"], NAMESPACE), POD_SECONDS)
    wait_for("the function's Service routing to the new pod only",
             lambda: function_endpoints(kube) == [pod["status"]["podIP"]], POD_SECONDS,
             lambda: str(function_endpoints(kube)))
    return revisions


def move(kube: Kube, kind: str, name: str, reference: str) -> None:
    """What a user does to install another release: point the package at it (`kubectl patch --type merge`)."""
    patch_spec(kube, PKG, kind, name, {"package": reference})


def current_revisions(kube: Kube) -> dict[str, str]:
    return {revision_kind: revision_of(kube, revision_kind, name)["metadata"]["name"]
            for _, name, revision_kind in RELEASED}


def test_the_next_release_takes_over_and_back_with_nothing_composed_moved(installed: Installed):
    """The next release of the Configuration (its Function dependency raised to that release) and of the Function
    (the same binary, its runtime image labelled with the release, so a new package, revision and pod), installed
    as a user moves a package: `spec.package` patched to the new tag. Crossplane's package manager does not move
    an installed dependency (that is its alpha EnableAlphaDependencyVersionUpgrades, off by default and in the
    README's install), so the Configuration's new revision names the Function that holds it back, in Crossplane's
    words, until the user patches the Function's `spec.package` too. Then a new revision of each is active and
    healthy, the Function's pod runs the new image, the previous one is gone, and both composites, touched, are
    composed through it (Synced at their new generation, Ready); no composed object, applied object or engine pod
    was deleted, recreated or moved. Rolling back (the Configuration first, whose old range admits
    both Function releases, then the Function) does the same."""
    kube = installed.kube
    wait_installed(installed)
    before = made_by_composing(kube)
    first = current_revisions(kube)
    function_next = xpkgs.push_function(installed.cli, installed.registry, function_binary(), NEXT)
    configuration_next = xpkgs.push_configuration(installed.cli, installed.registry, NEXT, f">={NEXT}-0, <v1.0.0-0")

    move(kube, "Configuration", "modelplane", configuration_next)

    def held_back() -> str | None:
        return said_false([kube.get(PKG, "Configuration", "modelplane")] + kube.list(PKG, "ConfigurationRevision"),
                          "is incompatible with constraint")

    message = wait_for("the Configuration's new revision naming the Function it needs", held_back, INSTALL_SECONDS,
                       lambda: conditions(kube.get(PKG, "Configuration", "modelplane")))
    assert f"incompatible dependencies: existing package {xpkgs.FUNCTION}@{xpkgs.VERSION} is incompatible with " \
        f"constraint >={NEXT}-0, <v1.0.0-0" in message, message
    assert kube.get(PKG, "Function", FUNCTION_OBJECT)["spec"]["package"].endswith(f":{xpkgs.VERSION}")
    move(kube, "Function", FUNCTION_OBJECT, function_next)
    upgraded = released(installed, NEXT, first)
    composed_again(kube)
    assert_nothing_moved(kube, before)

    move(kube, "Configuration", "modelplane", f"{xpkgs.CONFIGURATION}:{xpkgs.VERSION}")
    move(kube, "Function", FUNCTION_OBJECT, f"{xpkgs.FUNCTION}:{xpkgs.VERSION}")
    # The first release's revisions, kept inactive by the package manager, are active again.
    assert released(installed, xpkgs.VERSION, upgraded) == first
    composed_again(kube)
    assert_nothing_moved(kube, before)
    kinds = {key.split()[-2] for key in before}
    assert {"ModelEndpoint", "HTTPRoute", "Pod"} <= kinds, sorted(before)


def test_a_function_release_that_cannot_start_is_named_and_composed_objects_stay(installed: Installed):
    """A Function release whose runtime image exits at once (its entrypoint passes a flag the binary refuses),
    installed as a user moves it. Crossplane activates a new revision at once and deactivates the previous one,
    deleting its Deployment (upstream's behaviour: crossplane/crossplane#7298, #6289), so the function serves no
    one until the user moves back: the revision's RuntimeHealthy and the Function's Healthy are False in
    Crossplane's words, the pod exits with an error, and a composite touched meanwhile is not Synced, naming the
    function, and keeps Ready. Nothing composed, applied or scheduled is deleted, recreated or moved;
    moving back to the release before serves again."""
    kube = installed.kube
    wait_installed(installed)
    before = made_by_composing(kube)
    first = current_revisions(kube)
    crashing = xpkgs.push_function(installed.cli, installed.registry, function_binary(), CRASHING,
                                   ("--no-such-flag",))
    move(kube, "Function", FUNCTION_OBJECT, crashing)

    def refused() -> tuple[dict, str, list[dict]] | None:
        revisions = active_revisions(kube, "FunctionRevision", FUNCTION_OBJECT)
        if len(revisions) != 1 or revisions[0]["metadata"]["name"] == first["FunctionRevision"]:
            return None
        pods = deployment_pods(kube, revisions[0]["metadata"]["name"])
        statuses = [s for p in pods for s in p["status"].get("containerStatuses") or []]
        exited = [s[state]["terminated"] for s in statuses for state in ("state", "lastState")
                  if (s.get(state) or {}).get("terminated")]
        message = said_false([kube.get(PKG, "Function", FUNCTION_OBJECT)], "function package deployment is unavailable")
        return (revisions[0], message, exited) if exited and message else None

    revision, message, exited = wait_for("Crossplane saying the new release's runtime is unavailable", refused,
                                         POD_SECONDS, lambda: conditions(kube.get(PKG, "Function", FUNCTION_OBJECT)))
    unavailable = "function package deployment is unavailable with message: Deployment does not have minimum " \
        "availability."
    assert message.startswith('Package runtime health is "False" with message: ') and unavailable in message, \
        message
    runtime = condition(revision, "RuntimeHealthy")
    assert runtime["status"] == "False" and unavailable in runtime["message"], runtime
    assert all(t["exitCode"] != 0 for t in exited), exited
    assert function_image(installed, CRASHING) in [
        c["image"] for p in deployment_pods(kube, revision["metadata"]["name"]) for c in p["spec"]["containers"]]
    assert not kube.get("apps/v1", "Deployment", first["FunctionRevision"], NAMESPACE)
    [_, deployment] = composites(kube)
    generation = touch(kube, deployment)
    now = wait_for(f"{describe(deployment)} reconciled at generation {generation}",
                   lambda: composed_at(kube, deployment, generation), CONVERGE_SECONDS,
                   lambda: conditions(kube.get(API, "ModelDeployment", deployment["metadata"]["name"],
                                               deployment["metadata"]["namespace"])))
    synced = condition(now, "Synced")
    assert synced["status"] == "False" and f'"{FUNCTION_OBJECT}"' in synced["message"], synced
    assert is_true(now, "Ready"), conditions(now)
    assert_nothing_moved(kube, before)

    move(kube, "Function", FUNCTION_OBJECT, f"{xpkgs.FUNCTION}:{xpkgs.VERSION}")
    released(installed, xpkgs.VERSION, {"FunctionRevision": revision["metadata"]["name"]})
    assert current_revisions(kube) == first
    composed_again(kube)
    assert_nothing_moved(kube, before)


def test_an_unpullable_dependency_is_named_and_nothing_installed_moves(installed: Installed):
    kube = installed.kube
    wait_installed(installed)
    before = kube.get(PKG, "Function", FUNCTION_OBJECT)["metadata"]["resourceVersion"]
    root = installed.work / "broken"
    root.mkdir()
    (root / "crossplane.yaml").write_text(yaml.safe_dump({
        "apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": {"name": "broken"},
        "spec": {"dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                                "package": "ghcr.io/modelplaneai/function-missing", "version": ">=v0.1.0"}]}}))
    xpkg = installed.cli.build(root, installed.work / "broken.xpkg")
    installed.cli.push(xpkg, f"{installed.registry.address}/modelplaneai/broken:{xpkgs.VERSION}")
    kube.apply({"apiVersion": PKG, "kind": "Configuration", "metadata": {"name": "broken"},
                "spec": {"package": f"ghcr.io/modelplaneai/broken:{xpkgs.VERSION}"}})

    def said() -> str | None:
        return said_false([kube.get(PKG, "Configuration", "broken")] + kube.list(PKG, "ConfigurationRevision"),
                          "function-missing")

    message = wait_for("Crossplane naming the dependency it cannot pull", said, INSTALL_SECONDS,
                       lambda: conditions(kube.get(PKG, "Configuration", "broken")))
    assert 'cannot resolve package dependencies: missing dependencies: "ghcr.io/modelplaneai/function-missing"' \
        in message, message
    assert kube.get(PKG, "Function", FUNCTION_OBJECT)["metadata"]["resourceVersion"] == before
    assert is_true(kube.get(PKG, "Configuration", "modelplane"), "Installed", "Healthy")


def test_a_package_of_the_wrong_kind_is_refused_by_name(installed: Installed):
    kube = installed.kube
    wait_installed(installed)
    kube.apply({"apiVersion": PKG, "kind": "Provider", "metadata": {"name": "wrong-kind"},
                "spec": {"package": f"{xpkgs.FUNCTION}:{xpkgs.VERSION}"}})

    def said() -> str | None:
        objects = [kube.get(PKG, "Provider", "wrong-kind")] + [
            r for r in kube.list(PKG, "ProviderRevision")
            if r["metadata"]["labels"].get("pkg.crossplane.io/package") == "wrong-kind"]
        return said_false(objects, "package meta type is not Provider")

    # Crossplane's revision reconciler refuses it in these words (and logs them).
    wait_for("Crossplane refusing a Function package installed as a Provider", said, INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Provider", "wrong-kind")))
    assert is_true(kube.get(PKG, "Function", FUNCTION_OBJECT), "Installed", "Healthy")
