"""Mutual TLS as Crossplane uses it: certificates from Crossplane's CA, PKCS#1 keys, ALPN h2, clients verified."""

import os
import socket
import ssl
import subprocess

import grpc
import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

import certs
import conftest
import pipeline

CLASS = conftest.EXAMPLE_CLASS

def call(channel: grpc.Channel) -> fnv1.RunFunctionResponse:
    return grpcv1.FunctionRunnerServiceStub(channel).RunFunction(pipeline.request(CLASS, tag="tls"), timeout=10)


def assert_refused(server: conftest.FunctionServer, credentials: grpc.ChannelCredentials | None) -> None:
    with server.channel(credentials) if credentials else grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            call(channel)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value


def test_the_key_files_are_pkcs1_like_crossplanes(pki):
    assert pki.server.key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert (pki.server_dir / "tls.key").read_bytes().startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert pki.server.key.key_size == 2048


def test_a_client_with_a_certificate_from_the_ca_is_served(mtls_server):
    with mtls_server.channel() as channel:
        rsp = call(channel)
    assert rsp.meta.tag == "tls"
    assert [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL] == []


def test_the_server_negotiates_h2_over_tls_1_2_or_later(mtls_server, pki, tmp_path):
    # grpc-go (Crossplane's client) refuses a TLS server that does not select h2 through ALPN.
    (tmp_path / "client.crt").write_bytes(pki.client.cert_pem)
    (tmp_path / "client.key").write_bytes(pki.client.key_pem)
    context = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
    context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    context.set_alpn_protocols(["h2"])
    host, port = mtls_server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.selected_alpn_protocol() == "h2"
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_a_client_certificate_from_another_ca_is_refused(mtls_server, pki):
    stranger = certs.client(certs.certificate_authority("Someone Else's CA"))
    assert_refused(mtls_server, pki.client_credentials(stranger))


def test_a_client_without_a_certificate_is_refused(mtls_server, pki):
    assert_refused(mtls_server, grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem))


def test_a_plaintext_client_is_refused(mtls_server):
    assert_refused(mtls_server, None)


def test_with_no_arguments_it_serves_mtls_from_tls_server_certs_dir_as_crossplane_runs_it(tmp_path, pki):
    server = conftest.start_server(tmp_path, env={"TLS_SERVER_CERTS_DIR": str(pki.server_dir)},
                                   credentials=pki.client_credentials(), bare=True)
    try:
        with server.channel() as channel:
            assert call(channel).meta.tag == "tls"
        assert_refused(server, None)
    finally:
        assert server.stop() == 0


def test_without_credentials_or_insecure_it_refuses_to_start():
    env = {k: v for k, v in os.environ.items() if k not in conftest.SERVER_ENV}
    port = conftest.free_port()
    result = subprocess.run([str(conftest.function_binary()), "serve", "--address", f"127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode != 0
    assert "--tls-certs-dir" in result.stderr and "--insecure" in result.stderr
