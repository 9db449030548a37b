"""Fixtures that run the real `modelplane-function` binary and hand out gRPC clients for it.

The binary comes from MODELPLANE_FUNCTION_BIN (tests/run.sh sets it after `cargo build`); clients are the stubs
Crossplane publishes in crossplane-function-sdk-python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest
import yaml
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1

import certs
import wire

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CLASS_FILE = REPO_ROOT / "examples" / "classes" / "eks-h200-8x.yaml"
EXAMPLE_CLASS = yaml.safe_load(EXAMPLE_CLASS_FILE.read_text())
# How long a freshly started server may take to answer its first health check before the test gives up.
STARTUP_DEADLINE_SECONDS = 20
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
# Settings the server reads from the environment; a developer's shell must not leak them into the tests.
SERVER_ENV = ("ADDRESS", "TLS_SERVER_CERTS_DIR", "INSECURE", "DEBUG", "MAX_RECV_MESSAGE_SIZE", "RUST_LOG",
              "MAX_CONNECTIONS", "MAX_CONCURRENT_STREAMS", "MAX_CONCURRENT_CALLS", "HANDSHAKE_TIMEOUT_SECONDS")
SERVING = wire.field(1, wire.VARINT, 1)  # grpc.health.v1.HealthCheckResponse{status: SERVING}


def function_binary() -> Path:
    explicit = os.environ.get("MODELPLANE_FUNCTION_BIN")
    if explicit:
        path = Path(explicit)
    else:
        target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
        path = (target if target.is_absolute() else REPO_ROOT / target) / "debug" / "modelplane-function"
    if not path.is_file():
        pytest.fail(f"no modelplane-function binary at {path}: run `bash tests/run.sh`, or `cargo build` and set "
                    "MODELPLANE_FUNCTION_BIN")
    return path


def render(*args: str) -> subprocess.CompletedProcess:
    """Runs `modelplane-function render` with `args` from the repository root."""
    return subprocess.run([str(function_binary()), "render", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT)


def render_documents(xr: Path, *required: Path, observed: Path | None = None) -> list[dict]:
    """Renders `xr` with `required` files or directories (and `observed` composed resources) and returns the
    printed documents; fails on a non-zero exit (a FATAL result exits 3)."""
    args = [str(xr)]
    for path in required:
        args += ["--required", str(path)]
    if observed is not None:
        args += ["--observed", str(observed)]
    done = render(*args)
    assert done.returncode == 0, done.stderr + done.stdout
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def health(channel: grpc.Channel, service: str = "", timeout: float = 1) -> bytes:
    """Calls grpc.health.v1 Check with hand-encoded bytes (the health stubs are not a dependency)."""
    request = wire.field(1, wire.LEN, service.encode()) if service else b""
    return channel.unary_unary(HEALTH_CHECK)(request, timeout=timeout)


@dataclasses.dataclass
class FunctionServer:
    """A running `modelplane-function serve` and how to reach it."""
    process: subprocess.Popen
    address: str
    log: Path
    credentials: grpc.ChannelCredentials | None = None

    def channel(self, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
        creds = credentials or self.credentials
        if creds is None:
            return grpc.insecure_channel(self.address)
        return grpc.secure_channel(self.address, creds)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_server(tmp: Path, *flags: str, env: dict[str, str] | None = None,
                 credentials: grpc.ChannelCredentials | None = None, bare: bool = False) -> FunctionServer:
    """Starts `modelplane-function serve` on a free loopback port and waits until it answers health checks.

    `bare` runs the binary with no arguments, as Crossplane does; the address then comes from ADDRESS (Crossplane
    relies on the :9443 default, which a test cannot count on being free).
    """
    port = free_port()
    address = f"127.0.0.1:{port}"
    environment = {k: v for k, v in os.environ.items() if k not in SERVER_ENV} | (env or {})
    if bare:
        argv = [str(function_binary())]
        environment["ADDRESS"] = address
    else:
        argv = [str(function_binary()), "serve", "--address", address, *flags]
    log = tmp / f"function-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=environment)
    server = FunctionServer(process, address, log, credentials)
    deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
    while True:
        if process.poll() is not None:
            pytest.fail(f"modelplane-function exited with {process.returncode} at start:\n{server.logs()}")
        with server.channel() as channel:
            with contextlib.suppress(grpc.RpcError):
                if health(channel) == SERVING:
                    return server
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"modelplane-function did not answer health checks on {server.address}:\n{server.logs()}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def plaintext_server(tmp_path_factory) -> Iterator[FunctionServer]:
    server = start_server(tmp_path_factory.mktemp("plaintext"), "--insecure")
    yield server
    server.stop()


@dataclasses.dataclass
class Pki:
    ca: certs.KeyPair
    server: certs.KeyPair
    client: certs.KeyPair
    server_dir: Path

    def client_credentials(self, client: certs.KeyPair | None = None) -> grpc.ChannelCredentials:
        client = client or self.client
        return grpc.ssl_channel_credentials(root_certificates=self.ca.cert_pem, private_key=client.key_pem,
                                            certificate_chain=client.cert_pem)


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    ca = certs.certificate_authority()
    server_pair = certs.server(ca)
    directory = certs.write_server_dir(tmp_path_factory.mktemp("tls") / "server", ca, server_pair)
    return Pki(ca, server_pair, certs.client(ca), directory)


@pytest.fixture(scope="session")
def mtls_server(tmp_path_factory, pki) -> Iterator[FunctionServer]:
    server = start_server(tmp_path_factory.mktemp("mtls"), "--tls-certs-dir", str(pki.server_dir),
                          credentials=pki.client_credentials())
    yield server
    server.stop()


@pytest.fixture
def channel(plaintext_server) -> Iterator[grpc.Channel]:
    with plaintext_server.channel() as ch:
        yield ch


@pytest.fixture
def v1(channel) -> grpcv1.FunctionRunnerServiceStub:
    return grpcv1.FunctionRunnerServiceStub(channel)


@pytest.fixture
def v1beta1(channel) -> grpcv1beta1.FunctionRunnerServiceStub:
    return grpcv1beta1.FunctionRunnerServiceStub(channel)
