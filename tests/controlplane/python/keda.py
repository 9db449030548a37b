"""KEDA's real operator (v2.20.2, built by controlplane.sh from tests/controlplane/modules/keda) against the
control plane: it watches the ScaledObjects Crossplane composes, queries their Prometheus triggers itself, and
scales targets to and from zero through their scale subresource, which is KEDA's own decision, not its HPA's.

Its HPA needs KEDA's metrics API server registered with the aggregation layer, which this control plane does not
run: the HPA KEDA creates finds no metric and changes nothing, so between one replica and many the suite still does
the HPA's arithmetic itself (test_scheduling.py's `keda_replicas`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import requests
from kube import REPO_ROOT, wait_for
from ports import free_port

BIN = REPO_ROOT / "tests" / "controlplane" / ".bin" / "keda-operator"


@contextlib.contextmanager
def keda_operator(root: Path):
    """Runs the operator until the block ends. Its gRPC metrics service (for the metrics server no one runs here)
    wants a certificate: the control plane's own CA and admin pair serve."""
    assert BIN.is_file(), "no keda-operator binary: run `bash tests/controlplane/controlplane.sh build`"
    state = Path(os.environ["CONTROLPLANE_STATE"])
    certs = root / "keda-certs"
    certs.mkdir()
    for source, name in (("ca.crt", "ca.crt"), ("admin.crt", "tls.crt"), ("admin.key", "tls.key")):
        shutil.copy(state / "pki" / source, certs / name)
    probes = free_port()
    log_path = root / "keda-operator.log"
    log = log_path.open("w")
    env = {**os.environ, "KUBECONFIG": str(state / "kubeconfig"), "POD_NAMESPACE": "keda",
           "KEDA_CLUSTER_OBJECT_NAMESPACE": "keda", "WATCH_NAMESPACE": ""}
    process = subprocess.Popen(
        [str(BIN), "--enable-prometheus-metrics=false", f"--health-probe-bind-address=127.0.0.1:{probes}",
         f"--metrics-service-bind-address=127.0.0.1:{free_port()}", f"--cert-dir={certs}", "--zap-log-level=info"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"keda-operator exited with {process.returncode}: {log_path.read_text()[-3000:]}")
        try:
            return requests.get(f"http://127.0.0.1:{probes}/readyz", timeout=2).ok
        except requests.RequestException:
            return False

    try:
        wait_for("keda-operator ready", ready, 60, lambda: log_path.read_text()[-3000:])
        yield log_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        log.close()
