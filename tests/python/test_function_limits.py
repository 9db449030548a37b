"""What a client cannot do to the server, tried over real sockets: hold connections open without speaking, open
more connections than the server accepts, send more than it reads, or misconfigure it into a vague error.
"""

import copy
import os
import socket
import subprocess
import time

import grpc
import pytest
import yaml
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

import certs
import conftest
import pipeline
from conftest import EXAMPLE_CLASS


def call(channel, timeout: float = 30, **kwargs):
    return grpcv1.FunctionRunnerServiceStub(channel).RunFunction(pipeline.request(EXAMPLE_CLASS, **kwargs),
                                                                 timeout=timeout)


def host_port(server) -> tuple[str, int]:
    host, port = server.address.rsplit(":", 1)
    return host, int(port)


def closed_by_server(sock: socket.socket, wait: float) -> bool:
    """Reads until the server closes the connection (True) or `wait` seconds pass without it (False)."""
    sock.settimeout(wait)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_a_connection_that_never_sends_the_http2_preface_is_closed(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--handshake-timeout-seconds", "1")
    try:
        with socket.create_connection(host_port(server)) as idle:
            assert closed_by_server(idle, wait=10), "an idle connection must not be kept forever"
        with server.channel() as channel:
            assert call(channel, tag="after").meta.tag == "after"
    finally:
        assert server.stop() == 0


def test_a_connection_that_sends_the_preface_is_not_cut_by_the_handshake_timeout(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--handshake-timeout-seconds", "1")
    try:
        with server.channel() as channel:
            assert call(channel, tag="one").meta.tag == "one"
            time.sleep(1.5)  # past the handshake timeout: the same connection keeps serving
            assert call(channel, tag="two").meta.tag == "two"
    finally:
        assert server.stop() == 0


def test_connections_past_the_limit_wait_until_one_closes(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--max-connections", "2",
                                   "--handshake-timeout-seconds", "60")
    try:
        # start_server's health checks closed their connections; two silent ones now take both slots.
        time.sleep(0.5)
        first = socket.create_connection(host_port(server))
        second = socket.create_connection(host_port(server))
        with server.channel() as channel:
            with pytest.raises(grpc.RpcError) as waited:
                call(channel, timeout=2)
            assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        first.close()
        with server.channel() as channel:
            assert call(channel, tag="admitted").meta.tag == "admitted"
        second.close()
    finally:
        assert server.stop() == 0


def test_a_request_over_the_size_limit_is_resource_exhausted_as_grpc_go_answers(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--max-recv-message-size", "1")
    try:
        with server.channel() as channel:
            with pytest.raises(grpc.RpcError) as refused:
                call(channel, tag="x" * (2 * 1024 * 1024))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
            assert call(channel, tag="small").meta.tag == "small"
    finally:
        assert server.stop() == 0


def serve_briefly(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in conftest.SERVER_ENV} | (env or {})
    return subprocess.run([str(conftest.function_binary()), *args], capture_output=True, text=True, timeout=30,
                          env=environment)


def test_a_taken_port_is_reported_before_serving():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = "127.0.0.1:%d" % taken.getsockname()[1]
        result = serve_briefly("serve", "--insecure", "--address", address)
    assert result.returncode == 1
    assert f"cannot listen on {address}" in result.stderr
    assert "serving RunFunction" not in result.stderr


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes"])
def test_insecure_accepts_the_usual_true_spellings(tmp_path, value):
    server = conftest.start_server(tmp_path, env={"INSECURE": value}, bare=True)
    try:
        with server.channel() as channel:
            assert call(channel, tag=value).meta.tag == value
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("value", ["0", "false", "no"])
def test_insecure_false_still_needs_credentials(value):
    result = serve_briefly("serve", "--address", f"127.0.0.1:{conftest.free_port()}", env={"INSECURE": value})
    assert result.returncode == 1
    assert "no credentials were provided" in result.stderr


def test_an_insecure_value_that_is_not_a_boolean_is_refused():
    result = serve_briefly("serve", "--address", f"127.0.0.1:{conftest.free_port()}", env={"INSECURE": "maybe"})
    assert result.returncode == 2
    assert "maybe" in result.stderr


def broken_dir(tmp_path, pki, **replace: bytes | None):
    directory = certs.write_server_dir(tmp_path / "certs", pki.ca, pki.server)
    for name, content in replace.items():
        path = directory / name.replace("_", ".")
        if content is None:
            path.unlink()
        else:
            path.write_bytes(content)
    return directory


@pytest.mark.parametrize("replace, names, reason", [
    ({"ca_crt": None}, ["ca.crt"], "cannot read"),
    ({"tls_key": b"not a key\n"}, ["tls.key"], "holds no usable PEM private key"),
    ({"tls_crt": b""}, ["tls.crt"], "holds no PEM certificate"),
    ({"ca_crt": b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, ["ca.crt"], ""),
    ({"tls_key": "other"}, ["tls.crt", "tls.key"], "do not work together"),
])
def test_each_tls_failure_names_the_file_and_the_reason(tmp_path, pki, replace, names, reason):
    if replace.get("tls_key") == "other":
        replace = {"tls_key": certs.server(certs.certificate_authority("Another CA")).key_pem}
    directory = broken_dir(tmp_path, pki, **replace)
    result = serve_briefly("serve", "--address", f"127.0.0.1:{conftest.free_port()}",
                           "--tls-certs-dir", str(directory))
    assert result.returncode == 1, result.stderr
    for name in names:
        assert str(directory / name) in result.stderr, result.stderr
    assert reason in result.stderr
    assert "serving RunFunction" not in result.stderr


def heavy_request():
    """A ModelDeployment whose selector costs close to the CEL budget per device, over 100 clusters whose devices
    all differ, so nothing is memoized: minutes of matching, unless the call stops."""
    deployment = yaml.safe_load((conftest.REPO_ROOT / "examples/deployments/qwen3-coder.yaml").read_text())
    ones = "[" + ",".join(["1"] * 280) + "]"
    for member in deployment["spec"]["template"]["spec"]["engines"][0]["members"]:
        # Never true, so no cluster is accepted and every one is matched in full (no early fit, no short cut).
        member["nodeSelector"]["devices"][0]["selectors"] = [
            {"cel": f"{ones}.exists(a, {ones}.exists(b, a == b + 1))"}]
    cluster = yaml.safe_load(
        (conftest.REPO_ROOT / "tests/fixtures/clusters/standard/eks-h200-us-west.yaml").read_text())
    req = pipeline.request(deployment, tag="heavy")
    for i in range(100):
        clone = copy.deepcopy(cluster)
        clone["metadata"]["name"] = f"cluster-{i}"
        clone["status"]["pools"][0]["devices"][0]["attributes"]["productName"]["string"] = f"NVIDIA H200 #{i}"
        req.required_resources["inference-clusters"].items.add().resource.CopyFrom(resource.dict_to_struct(clone))
    return req


def test_an_abandoned_call_stops_working_and_frees_its_slot(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--max-concurrent-calls", "1")
    try:
        with server.channel() as channel:
            stub = grpcv1.FunctionRunnerServiceStub(channel)
            # No grpc-timeout: the server would compose for its whole 10 s call budget unless it sees the cancel.
            abandoned = stub.RunFunction.future(heavy_request())
            time.sleep(0.5)
            assert abandoned.cancel(), "the heavy call finished before it could be abandoned"
            # The only call slot is free again only once the abandoned call has stopped composing, well inside
            # the 10 s the heavy call would otherwise hold it.
            assert call(channel, timeout=5, tag="next").meta.tag == "next"
    finally:
        assert server.stop() == 0


def test_a_call_that_finds_every_slot_taken_hears_the_server_is_busy_and_the_slot_holder_finishes(tmp_path):
    """With its one slot held by a call that composes for its whole budget, a second call waits a quarter of its
    deadline and is answered UNAVAILABLE, gRPC's "retry with backoff", saying why and what to change; it is never
    left to time out. The call holding the slot still ends with its own answer, and the server serves on."""
    server = conftest.start_server(tmp_path, "--insecure", "--max-concurrent-calls", "1")
    try:
        with server.channel() as channel:
            stub = grpcv1.FunctionRunnerServiceStub(channel)
            holder = stub.RunFunction.future(heavy_request(), timeout=8)
            time.sleep(0.5)
            assert not holder.done(), "the heavy call finished before the second call was sent"
            with pytest.raises(grpc.RpcError) as refused:
                call(channel, timeout=4, tag="second")
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
            assert refused.value.details().startswith("busy: all 1 call slots"), refused.value.details()
            assert "MAX_CONCURRENT_CALLS" in refused.value.details()
            assert not holder.done(), "the slot came free before the second call gave up: nothing was shown"
            # The holder composes to 90% of its 8 s and answers a FATAL that says so, not a transport error.
            answer = holder.result()
            assert "deadline" in answer.results[0].message, answer
            assert call(channel, timeout=30, tag="after").meta.tag == "after"
    finally:
        assert server.stop() == 0
