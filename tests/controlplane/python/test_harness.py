"""The harness's own failure discipline: a simulated-node component that cannot start stops `controlplane.sh up`
with its name, and everything the script had started before it is stopped.

It runs a second control plane beside the one the suite runs on, in a state directory of its own, with a kwok stage
config kwok refuses to load (CONTROLPLANE_KWOK_STAGES).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kube import REPO_ROOT

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
    state directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
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
