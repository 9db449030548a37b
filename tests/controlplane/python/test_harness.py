"""The harness's own failure discipline: a component that cannot start stops `controlplane.sh up` with its name,
and everything the script had started before it is stopped; real nodes leave nothing behind, also when the run
that started them is killed.

Each test runs a second control plane beside the one the suite runs on, in a state directory of its own: one with a
kwok stage config kwok refuses to load (CONTROLPLANE_KWOK_STAGES), one with a node label the kubelet refuses, one
whose `run` is killed while a container runs. The real-node tests need the machine's one set of real nodes: run
this file under a control plane without `--kubelets` (or none: it starts its own).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from kube import REPO_ROOT, Kube, wait_for

SCRIPT = REPO_ROOT / "tests" / "controlplane" / "controlplane.sh"
# Every wait of the script is bounded (120 s a component); five components start before kwok.
BOUND_SECONDS = 6 * 120
# A Stage whose resourceRef is a number, not an object: kwok fails reading its config.
BROKEN_STAGE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: broken
spec:
  resourceRef: 12
"""


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that mention `text` (every component is started with paths under its
    state directory). Not this test's own process: a state under tmp_path has `pytest` in its path, so the
    command line is no way to tell."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def test_a_kwok_that_cannot_start_names_itself_and_leaves_nothing_running(tmp_path):
    stages = tmp_path / "stages"
    stages.mkdir()
    (stages / "broken.yaml").write_text(BROKEN_STAGE)
    state = tmp_path / "state"
    env = {**os.environ, "CONTROLPLANE_STATE": str(state), "CONTROLPLANE_KWOK_STAGES": str(stages)}
    done = subprocess.run(["bash", str(SCRIPT), "up", "--nodes"], env=env, capture_output=True, text=True,
                          timeout=BOUND_SECONDS, cwd=REPO_ROOT)
    assert done.returncode != 0, done.stdout
    assert "controlplane: FAILED: kwok exited while starting" in done.stderr, done.stderr[-2000:]
    assert "StageSpec.spec.resourceRef" in done.stderr, "the script shows kwok's own reason"
    # etcd, kube-apiserver, kube-controller-manager and kube-scheduler had started: all of them are stopped.
    assert "stopped 4 processes" in done.stderr, done.stderr[-2000:]
    assert not processes_mentioning(str(state)), processes_mentioning(str(state))


# --- real nodes -------------------------------------------------------------------------------------------------

# What real nodes make outside their state directory (tests/controlplane/nodes.sh), each named by the harness.
LOCK = Path("/run/modelplane-test-nodes")
SYSCTLS = ["net.ipv4.ip_forward", "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.conf.all.route_localnet"]


def sysctls() -> dict[str, str]:
    return {name: Path("/proc/sys", *name.split(".")).read_text().strip() for name in SYSCTLS}


def nft_tables() -> str:
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, timeout=30).stdout


def real_node_leftovers(state: Path) -> list[str]:
    """Everything real nodes of the control plane in `state` could leave: processes (containerd's shims name its
    socket under `state`), mounts, bridges, nftables tables, cgroups, the lock."""
    found = processes_mentioning(str(state))
    found += [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if f" {state}/" in line]
    found += [f"bridge {link.name}" for link in Path("/sys/class/net").glob("mpbr*")]
    found += [f"nft {line}" for line in nft_tables().splitlines() if "modelplane" in line or "kube-proxy" in line]
    found += [str(p) for p in Path("/sys/fs/cgroup").glob("*/modelplane-test-nodes")]
    found += [str(LOCK)] if LOCK.exists() else []
    return found


# Machine-wide directories containerd, CNI and the kubelet write to.
HOST_DIRS = [Path("/run/containerd/s"), Path("/var/lib/cni/results"), Path("/var/log/containers")]


def host_files() -> set[str]:
    return {str(d) for d in HOST_DIRS if d.exists()} | {str(f) for d in HOST_DIRS if d.is_dir() for f in d.iterdir()}


@pytest.fixture
def machine_without_real_nodes():
    """Fails unless no control plane runs real nodes on this machine (they are one set a machine); checks that the
    machine's sysctls and the machine-wide directories containerd, CNI and the kubelet write to are as they were
    afterwards."""
    if os.environ.get("CONTROLPLANE_KUBELETS"):
        pytest.fail("this test starts real nodes of its own: run it under a control plane without --kubelets")
    assert not LOCK.exists(), f"{LOCK} says another control plane runs real nodes"
    before, files = sysctls(), host_files()
    yield
    assert sysctls() == before, "the sysctls the kubelet raises are put back"
    assert host_files() == files, sorted(host_files() ^ files)


def test_a_kubelet_that_cannot_start_names_itself_and_leaves_nothing_behind(tmp_path, machine_without_real_nodes):
    state = tmp_path / "state"
    # The kubelet refuses to label its own Node in the kubernetes.io namespace (NodeRestriction's rule).
    env = {**os.environ, "CONTROLPLANE_STATE": str(state), "CONTROLPLANE_KUBELET_LABELS": "kubernetes.io/bad=1"}
    done = subprocess.run(["bash", str(SCRIPT), "up", "--kubelets", "1"], env=env, capture_output=True, text=True,
                          timeout=BOUND_SECONDS, cwd=REPO_ROOT)
    assert done.returncode != 0, done.stdout
    assert "controlplane: FAILED: kubelet-0 exited while starting" in done.stderr, done.stderr[-2000:]
    assert "kubernetes.io/bad" in done.stderr, "the script shows the kubelet's own reason"
    # etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, containerd and CoreDNS had started.
    assert "stopped 7 processes" in done.stderr, done.stderr[-2000:]
    assert not real_node_leftovers(state), real_node_leftovers(state)


PAUSE_IMAGE = "modelplane.test/pause:local"  # loaded into every node by the harness


@pytest.fixture
def short_state():
    """A state directory with a short path: a real node's sockets (the DRA driver's registration socket under the
    kubelet's root) must fit the kernel's 108 bytes for a unix socket path, which pytest's tmp_path overruns."""
    directory = Path(tempfile.mkdtemp(prefix="mp-cp-"))
    yield directory / "state"
    shutil.rmtree(directory, ignore_errors=True)


def test_real_nodes_of_a_killed_run_are_cleaned_up_by_the_next_up(short_state, machine_without_real_nodes):
    state = short_state
    env = {**os.environ, "CONTROLPLANE_STATE": str(state)}
    # `run` holds the control plane while its command runs; the command waits for the test to kill `run`.
    run = subprocess.Popen(["bash", str(SCRIPT), "run", "--kubelets", "1", "--", "sleep", str(BOUND_SECONDS)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                           start_new_session=True)
    try:
        env_file = state / "env"
        wait_for("the control plane with a real node", lambda: env_file.exists() or run.poll() is not None,
                 BOUND_SECONDS)
        assert run.poll() is None, run.stderr.read()
        server = next(line.split("=", 1)[1] for line in env_file.read_text().splitlines()
                      if line.startswith("export CONTROLPLANE_API="))
        kube = Kube(server, state / "pki" / "ca.crt", state / "pki" / "admin.crt", state / "pki" / "admin.key")
        kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "namespace": "default"},
                    "spec": {"nodeSelector": {"modelplane.test/kubelet": "true"},
                             "tolerations": [{"operator": "Exists"}],
                             "containers": [{"name": "c", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}})
        wait_for("a container running on the real node",
                 lambda: ((kube.get("v1", "Pod", "held", "default") or {}).get("status") or {}).get("phase")
                 == "Running", 120)

        # Killed as a job control or CI timeout kills a script: no trap runs, everything it started lives on.
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        assert processes_mentioning(str(state)), "the killed run's processes and the container's shim live on"

        again = subprocess.run(["bash", str(SCRIPT), "up", "--kubelets", "1"], env=env, capture_output=True,
                               text=True, timeout=BOUND_SECONDS, cwd=REPO_ROOT)
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"stopping what a cut-short run left in {state}" in again.stderr, again.stderr[-3000:]
        assert "cleaning what the real nodes of a cut-short run" in again.stderr, again.stderr[-3000:]
        down = subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, text=True,
                              timeout=BOUND_SECONDS, cwd=REPO_ROOT)
        assert down.returncode == 0, down.stderr[-3000:]
        assert not real_node_leftovers(state), real_node_leftovers(state)
    finally:
        # The killed run's command (sleep) is nobody's now (and, should the test have failed early, so is all that
        # run started): its process group goes, and `down` cleans up after it.
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        run.wait(timeout=30)
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, timeout=BOUND_SECONDS,
                       cwd=REPO_ROOT)
