"""The endpoint picker we compose for a replica, run by a test as a process of its own: the Gateway API Inference
Extension's picker (`cmd/epp` at v1.5.0, the last release holding it; from v1.6.0 it lives in llm-d's router,
which the Go module proxy does not serve), built by `controlplane.sh build epp`, and `ask-picker`, which asks it
over Envoy's ext-proc protocol, as Envoy would for a request to the pool.

The image we compose (llm-d's router v0.9.0) is that picker moved, with its plugins, under the config group
`llm-d.ai/v1alpha1`; the one change made here to the composed config is that group, back to the inference
extension's `inference.networking.x-k8s.io/v1alpha1`. Its loader decodes strictly and refuses a plugin type it
does not know, so the composed plugin names and parameters are read by the picker's own code. Every other argument
is the composed Deployment's, but the ports (free loopback ones) and the config file's path.

Used by test_endpoint_picker.py (engines on loopback) and test_serving_live.py (engine pods on real nodes).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import installs
from kube import wait_for
from ports import free_port

COMPOSED_GROUP = "llm-d.ai/v1alpha1"
PICKER_GROUP = "inference.networking.x-k8s.io/v1alpha1"
# The picker reads the engines' metrics every 50 ms (its default); a figure set is read well within this.
SETTLE_SECONDS = 1.0
# The model every test asks for (the examples' small one).
MODEL = "Qwen/Qwen3-0.6B"


class Process:
    """A process of the test, its output in a file, stopped at the end."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.log_path = log_path
        clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        with log_path.open("w") as log:
            self.process = subprocess.Popen(argv, env=clean | (env or {}), stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text()[-4000:]

    def alive(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"{self.log_path.stem} exited with {self.process.returncode}:\n{self.log()}")
        return True

    def stop(self) -> None:
        installs.stop_process(self.process)


class Picker:
    """The picker started from a replica's composed ConfigMap and Deployment, watching the composed pool through
    `kubeconfig`, and asked until it picks an endpoint (`ready_prompt`)."""

    def __init__(self, config_map: dict, deployment: dict, kubeconfig: Path, tmp_path: Path):
        text = config_map["data"]["epp-config.yaml"]
        assert text.startswith(f"apiVersion: {COMPOSED_GROUP}\n"), text
        config = tmp_path / "epp-config.yaml"
        config.write_text(text.replace(COMPOSED_GROUP, PICKER_GROUP, 1))
        self.grpc_port = free_port()
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        args = [a for a in container["args"] if not a.startswith(("--config-file=", "--grpc-port="))]
        assert len(args) == len(container["args"]) - 2, container["args"]
        self.process = Process([str(installs.built_component("epp")), *args, f"--config-file={config}",
                                f"--grpc-port={self.grpc_port}", f"--grpc-health-port={free_port()}",
                                f"--metrics-port={free_port()}", "--v=2"],
                               tmp_path / "epp.log", env={"KUBECONFIG": str(kubeconfig)})

    def wait_picking(self, timeout: float = 90) -> None:
        wait_for("the picker picking", lambda: self.process.alive() and self.ask("ready?").get("endpoint"),
                 timeout, self.process.log)

    def ask(self, prompt: str) -> dict:
        body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 8})
        done = subprocess.run([str(installs.built_component("ask-picker")), "-addr", f"127.0.0.1:{self.grpc_port}",
                               "-path", "/v1/completions", "-body", body], capture_output=True, text=True,
                              timeout=30)
        if done.returncode != 0:
            return {"error": done.stderr}
        return json.loads(done.stdout)

    def picks(self, prompt: str, expected: str) -> None:
        """Once the figures just set have been read, the picker picks EXPECTED (`address:port`) for PROMPT, at the
        first ask: a retry would warm other engines' prefix caches with the prompt, and a tie broken at random
        could pass by chance."""
        time.sleep(SETTLE_SECONDS)
        answer = self.ask(prompt)
        assert answer.get("endpoint") == expected, f"{answer}\n{self.process.log()}"

    def stop(self) -> None:
        self.process.stop()
