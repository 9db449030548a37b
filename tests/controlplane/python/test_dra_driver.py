"""The test DRA driver (tests/controlplane/modules/dra-driver) without a kubelet: it reads, for every example
InferenceClass, the devices file `simulated_nodes.driver_devices` writes, into exactly the devices a simulated
node's ResourceSlice lists; it refuses to start, naming what it waited for, until the kubelet made its plugin
registry; it needs every module at the version the Kubernetes components' module selects; and its Go unit tests
(the devices file, prepare and unprepare) pass. A live run on a real kubelet is the harness's (docs/testing.md).
No API server is needed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from installs import CONTROLPLANE, built_component
from kube import REPO_ROOT
from ports import free_port
from simulated_nodes import driver_devices, slice_devices

MODULE = CONTROLPLANE / "modules" / "dra-driver"
CLASSES = REPO_ROOT / "examples" / "classes"


@pytest.fixture(scope="module")
def binary() -> Path:
    return built_component("dra-driver")


UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def quantity(value: str) -> int:
    """A Kubernetes quantity's value (the driver writes it canonically: 81920Mi comes back as 80Gi)."""
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]*)", value).groups()
    return int(number) * UNITS[unit]


def canonical(devices: list[dict]) -> list[dict]:
    return [{**d, "capacity": {k: quantity(v["value"]) for k, v in (d.get("capacity") or {}).items()}}
            for d in devices]


@pytest.mark.parametrize("path", sorted(CLASSES.glob("*.yaml")), ids=lambda p: p.stem)
def test_devices_file_of_every_class_reads_as_its_resource_slice(binary, tmp_path, path):
    inference_class = yaml.safe_load(path.read_text())
    entries = [d for d in inference_class["spec"].get("devices") or [] if d.get("claim") == "DRA"]
    assert entries, f"{path.name} has no DRA devices"
    for driver in sorted({d["driver"] for d in entries}):
        devices_file = tmp_path / f"{driver}.json"
        devices_file.write_text(json.dumps(driver_devices(inference_class, driver)))
        done = subprocess.run([str(binary), f"--driver-name={driver}", f"--devices={devices_file}", "--check"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        expected = [d for entry in entries if entry["driver"] == driver for d in slice_devices(entry)]
        assert canonical(json.loads(done.stdout)) == canonical(expected)


def test_waits_for_the_kubelets_plugin_registry(binary, tmp_path):
    devices_file = tmp_path / "devices.yaml"
    devices_file.write_text(yaml.safe_dump({"devices": [{"name": "gpu-0"}]}))
    port = free_port()  # nothing answers there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "test", "user": {"token": "none"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}))
    root = tmp_path / "kubelet"
    done = subprocess.run([str(binary), "--node-name=node-a", f"--kubeconfig={kubeconfig}", f"--kubelet-root={root}",
                           f"--devices={devices_file}", "--wait=2s"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
    assert done.returncode == 1
    assert f"the kubelet's plugin registry {root}/plugins_registry and Node node-a were not both there" in done.stderr
    assert not (root / "plugins").exists(), "the driver made its directories before the kubelet was there"


def module_versions(go_mod: Path) -> dict[str, str]:
    """The version go.mod selects for each module it names: its require lines, then its replace lines."""
    text = go_mod.read_text()
    versions = dict(re.findall(r"^\s+(\S+) (v\S+)(?: // indirect)?$", text, re.MULTILINE))
    versions |= dict(re.findall(r"^\s+(\S+) => \S+ (v\S+)$", text, re.MULTILINE))
    return versions


def test_shares_the_kubernetes_modules_versions():
    """Every module the driver needs is at the version the Kubernetes components' module selects, so a bump of
    one without the other (which would compile Kubernetes' packages twice) fails here."""
    ours = module_versions(MODULE / "go.mod")
    theirs = module_versions(CONTROLPLANE / "modules" / "kubernetes" / "go.mod")
    assert "k8s.io/dynamic-resource-allocation" in ours
    assert {m: (v, theirs.get(m)) for m, v in ours.items() if theirs.get(m) != v} == {}


def test_go_unit_tests():
    """The devices file, and prepare and unprepare keeping their books across a restart, in Go."""
    done = subprocess.run(["go", "test", "-count=1", "./..."], cwd=MODULE, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
