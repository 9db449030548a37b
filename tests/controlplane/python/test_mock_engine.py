"""The mock vLLM engine the test images run (tests/controlplane/modules/mock-engine), as a process on loopback: it
answers OpenAI's and Anthropic's shapes, streams ending in `[DONE]`, reports the vLLM metric names our composed
rules read, keeps /health at 503 until it is ready, and a leader and a worker started as the seed's gang command
starts them find each other over TCP. Its Go unit tests run here too. No API server is needed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests
from installs import CONTROLPLANE, built_component, stop_process
from kube import REPO_ROOT, wait_for
from ports import free_port

MODULE = CONTROLPLANE / "modules" / "mock-engine"
ENGINE_METRICS = REPO_ROOT / "function" / "src" / "workload" / "engine_metrics.rs"
# Every wait here is on a local process that starts in milliseconds.
START_SECONDS = 20


@pytest.fixture(scope="module")
def binary() -> Path:
    """The engine, built as the images get it."""
    return built_component("mock-engine")


class Engine:
    """One mock-engine process, its output in a file, stopped at the end of the test."""

    def __init__(self, binary: Path, tmp_path: Path, name: str, argv: list[str], env: dict[str, str],
                 http_port: int):
        self.log_path = tmp_path / f"{name}.log"
        self.url = f"http://127.0.0.1:{http_port}"
        # Only what the test gives: no proxy, and no MODELPLANE_* of the caller's.
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("MODELPLANE_", "MOCK_ENGINE_")) and "proxy" not in k.lower()}
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen([str(binary), *argv], env=clean | env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(f"{name} listening", self.listening, START_SECONDS, self.log)

    def listening(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"the engine exited with {self.process.returncode}:\n{self.log()}")
        try:
            requests.get(self.url + "/mock/info", timeout=2)
            return True
        except requests.ConnectionError:
            return False

    def log(self) -> str:
        return self.log_path.read_text()

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url + path, timeout=10)

    def post(self, path: str, body: dict, stream: bool = False) -> requests.Response:
        return requests.post(self.url + path, json=body, timeout=10, stream=stream)

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture
def start(binary, tmp_path):
    """Starts engines as `vllm ARGV...` with the environment given; every one is stopped afterwards."""
    started: list[Engine] = []

    def run(name: str, argv: list[str], env: dict[str, str] | None = None, http_port: int | None = None) -> Engine:
        port = http_port or free_port()
        if not any(a.startswith("--port") for a in argv) and "--headless" not in argv:
            argv = [*argv, f"--port={port}"]
        engine = Engine(binary, tmp_path, name, argv, env or {}, port)
        started.append(engine)
        return engine

    yield run
    for engine in started:
        engine.stop()


def small(start, **env: str) -> Engine:
    """The small example's engine: the image's entrypoint with the ModelDeployment's args."""
    return start("small", ["serve", "--model=Qwen/Qwen3-0.6B", "--served-model-name=qwen3-small",
                           "--max-model-len", "4096"], env={"MOCK_ENGINE_TOKEN_SECONDS": "0", **env})


def sse(response: requests.Response) -> list[tuple[str | None, str]]:
    """The (event, data) pairs of a server-sent event stream."""
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events, event = [], None
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((event, line.removeprefix("data: ")))
            event = None
    return events


def test_openai_shapes(start):
    engine = small(start)
    models = engine.get("/v1/models").json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["qwen3-small"]
    assert models["data"][0]["root"] == "Qwen/Qwen3-0.6B"

    chat = engine.post("/v1/chat/completions", {"model": "qwen3-small", "max_tokens": 3,
                                                 "messages": [{"role": "user", "content": "hello there"}]})
    assert chat.status_code == 200, chat.text
    body = chat.json()
    assert body["object"] == "chat.completion" and body["model"] == "qwen3-small"
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"] == "Mock vLLM qwen3-small"
    assert choice["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}

    # Content as a list of parts, the model left out (vLLM takes its first served name).
    chat = engine.post("/v1/chat/completions", {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "ping"}]}]}).json()
    assert chat["choices"][0]["message"]["content"].endswith("heard: ping")
    assert chat["choices"][0]["finish_reason"] == "stop"

    completion = engine.post("/v1/completions", {"model": "qwen3-small", "prompt": "once upon", "max_tokens": 2})
    assert completion.status_code == 200, completion.text
    assert completion.json()["object"] == "text_completion"
    assert completion.json()["choices"][0]["text"] == "Mock vLLM"

    for path in ("/v1/chat/completions", "/v1/completions"):
        missing = engine.post(path, {"model": "gpt-4", "prompt": "x", "messages": [{"role": "user", "content": "x"}]})
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "NotFoundError"
        assert "gpt-4" in missing.json()["error"]["message"]


def test_anthropic_messages(start):
    engine = small(start)
    reply = engine.post("/v1/messages", {"model": "qwen3-small", "max_tokens": 2, "system": "be brief",
                                         "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "qwen3-small"
    assert body["content"] == [{"type": "text", "text": "Mock vLLM"}]
    assert body["stop_reason"] == "max_tokens"
    assert body["usage"] == {"input_tokens": 3, "output_tokens": 2}

    missing = engine.post("/v1/messages", {"model": "claude", "max_tokens": 2,
                                           "messages": [{"role": "user", "content": "hi"}]})
    assert missing.status_code == 404
    assert missing.json()["type"] == "error" and missing.json()["error"]["type"] == "not_found_error"


def test_streams_end_with_done(start):
    engine = small(start)
    events = sse(engine.post("/v1/chat/completions", {
        "model": "qwen3-small", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "stream please"}]}, stream=True))
    assert events[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Mock vLLM qwen3-small on rank 0 heard: stream please"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 9

    events = sse(engine.post("/v1/completions", {"model": "qwen3-small", "prompt": "x", "stream": True,
                                                  "max_tokens": 2}, stream=True))
    assert events[-1] == (None, "[DONE]")
    assert "".join(json.loads(d)["choices"][0]["text"] for _, d in events[:-1]) == "Mock vLLM"

    events = sse(engine.post("/v1/messages", {"model": "qwen3-small", "max_tokens": 3, "stream": True,
                                              "messages": [{"role": "user", "content": "hi"}]}, stream=True))
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                     "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert all(json.loads(data)["type"] == name for name, data in events)
    assert "".join(json.loads(d)["delta"]["text"] for n, d in events if n == "content_block_delta") == \
        "Mock vLLM qwen3-small"
    assert json.loads(events[-2][1])["delta"]["stop_reason"] == "max_tokens"


def vllm_sources() -> dict[str, list[str]]:
    """Each `modelplane_*` figure the composed rules record, with the vLLM metric names they read it from (the
    function's own table, function/src/workload/engine_metrics.rs)."""
    source = ENGINE_METRICS.read_text()
    figures = {record: re.findall(r'"(vllm:[a-z_]+)"', sources) for record, sources in
               re.findall(r'record:\s*"([^"]+)",.*?sources:\s*&\[(.*?)\]', source, re.DOTALL)}
    return {record: names for record, names in figures.items() if names}


def scrape(engine: Engine) -> dict[str, float]:
    """The engine's samples, by their name and labels as written."""
    text = engine.get("/metrics").text
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_metrics_are_vllms_names_and_move(start):
    engine = small(start)
    figures = vllm_sources()
    assert len(figures) >= 7, f"the function's figures were not found in {ENGINE_METRICS}: {figures}"
    engine.post("/v1/chat/completions", {"model": "qwen3-small", "max_tokens": 4,
                                         "messages": [{"role": "user", "content": "a b c"}]})
    samples = scrape(engine)
    names = {key.split("{")[0] for key in samples}
    for record, sources in figures.items():
        assert names & set(sources), f"{record}: the engine reports none of {sources}"
    # Every series carries vLLM's labels, model_name being the first served name.
    assert all('model_name="qwen3-small",engine="0"' in key for key in samples)
    labels = '{model_name="qwen3-small",engine="0"}'
    assert samples[f"vllm:prompt_tokens_total{labels}"] == 3
    assert samples[f"vllm:generation_tokens_total{labels}"] == 4
    assert samples[f"vllm:time_to_first_token_seconds_count{labels}"] == 1
    assert samples[f"vllm:num_requests_waiting{labels}"] == 0

    state = engine.post("/mock/state", {"waiting": 6, "running": 2, "kvCacheUsage": 0.5})
    assert state.status_code == 200, state.text
    samples = scrape(engine)
    assert samples[f"vllm:num_requests_waiting{labels}"] == 6
    assert samples[f"vllm:num_requests_running{labels}"] == 2
    assert samples[f"vllm:kv_cache_usage_perc{labels}"] == 0.5
    engine.post("/mock/state", {"waiting": None})
    assert scrape(engine)[f"vllm:num_requests_waiting{labels}"] == 0
    assert engine.post("/mock/state", {"queue": 1}).status_code == 400


def test_health_follows_readiness(start):
    engine = small(start, MOCK_ENGINE_STARTUP_SECONDS="2")
    assert engine.get("/health").status_code == 503
    refused = engine.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
    assert refused.status_code == 503 and refused.json()["error"]["type"] == "ServiceUnavailableError"
    wait_for("the engine ready after its startup delay", lambda: engine.get("/health").status_code == 200, 10,
             lambda: engine.get("/health").text)
    engine.post("/mock/state", {"healthy": False})
    assert engine.get("/health").status_code == 503
    engine.post("/mock/state", {"healthy": None})
    assert engine.get("/health").status_code == 200


def gang_argv(rank: int, master_port: int, master_addr: str) -> list[str]:
    """The seed's gang command (examples/deployments/qwen3-coder.yaml) after the kubelet expanded
    $(MODELPLANE_LEADER_ADDRESS), on a free master port."""
    argv = ["serve", "Qwen/Qwen3-Coder-480B-A35B-Instruct", "--served-model-name=qwen3-coder",
            "--tensor-parallel-size=8", "--pipeline-parallel-size=2", "--distributed-executor-backend=mp",
            "--nnodes=2", f"--node-rank={rank}", f"--master-addr={master_addr}", f"--master-port={master_port}"]
    return argv + (["--headless"] if rank else []) + ["--max-model-len=32768"]


def test_leader_and_worker_handshake(start):
    master = free_port()
    leader = start("leader", gang_argv(0, master, "127.0.0.1"), env={"MODELPLANE_RANK": "0"})
    assert "starting as MODELPLANE_RANK=0 with argv" in leader.log()
    assert leader.get("/health").status_code == 503, "the leader was ready without its worker"
    assert "0 of 1 worker ranks connected" in leader.get("/health").text

    worker_port = free_port()
    worker = start("worker", gang_argv(1, master, "localhost"), http_port=worker_port,
                   env={"MODELPLANE_RANK": "1", "MOCK_ENGINE_INFO_PORT": str(worker_port),
                        "GPU_DEVICE_0": "gpu-3"})
    wait_for("the leader ready with its worker", lambda: leader.get("/health").status_code == 200, START_SECONDS,
             leader.log)
    assert "connected to leader localhost (127.0.0.1) as rank 1" in worker.log()

    info = worker.get("/mock/info").json()
    assert info["role"] == "worker" and info["headless"] and info["ready"]
    assert info["nodeRank"] == 1 and info["modelplaneRank"] == "1"
    assert info["masterAddr"] == "localhost" and "127.0.0.1" in info["masterAddrResolved"]
    assert info["leaderConnection"] == f"127.0.0.1:{master}"
    assert info["env"] == {"MODELPLANE_RANK": "1", "GPU_DEVICE_0": "gpu-3"}
    assert info["servedModels"] == ["qwen3-coder"]
    # A headless worker has no API server, as vLLM's has none.
    assert worker.post("/v1/chat/completions", {"messages": []}).status_code == 404

    info = leader.get("/mock/info").json()
    assert info["role"] == "leader" and info["connectedRanks"] == [1] and info["modelplaneRank"] == "0"
    assert info["hostname"] == socket.gethostname() and "--max-model-len=32768" in info["ignoredFlags"]

    # A worker whose leader goes exits, as vLLM's does; the pod's restart policy brings it back.
    leader.stop()
    assert worker.process.wait(10) != 0
    assert "lost the leader localhost (127.0.0.1)" in worker.log()


def test_worker_gives_up_on_a_leader_that_never_answers(binary):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    env = {"PATH": os.environ.get("PATH", ""), "MOCK_ENGINE_LEADER_TIMEOUT_SECONDS": "2",
           "MOCK_ENGINE_INFO_PORT": str(free_port())}
    worker = subprocess.run([str(binary), *gang_argv(1, port, "127.0.0.1")], capture_output=True, text=True,
                            timeout=30, env=env)
    assert worker.returncode == 1
    assert f"could not connect to the leader 127.0.0.1:{port} within 2s" in worker.stderr
    assert "attempt 1 to reach the leader" in worker.stderr
    assert time.monotonic() - started < 10


def test_bad_command_line_exits_as_argparse_does(binary):
    done = subprocess.run([str(binary), "serve", "m", "--nnodes=2", "--node-rank=5"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and "--node-rank=5" in done.stderr


def test_go_unit_tests():
    """CLI parsing, the stream's end, readiness gating and the gang handshake, in Go."""
    done = subprocess.run(["go", "test", "-count=1", "./..."], cwd=MODULE, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "CGO_ENABLED": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
