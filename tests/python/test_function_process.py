"""The server as a process: how it stops and what it logs."""

import json
import signal

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

import conftest
import pipeline

CLASS = conftest.EXAMPLE_CLASS

def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys in a log line: {keys}"
    return dict(pairs)


def test_sigterm_stops_the_server_promptly_with_exit_code_0(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure")
    try:
        with server.channel() as channel:
            rsp = grpcv1.FunctionRunnerServiceStub(channel).RunFunction(pipeline.request(CLASS), timeout=30)
            assert not [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=10) == 0, server.logs()
    finally:
        server.stop()


def test_debug_logs_are_json_lines_of_our_own_events_carrying_the_request_tag(tmp_path):
    server = conftest.start_server(tmp_path, "--insecure", "--debug")
    try:
        with server.channel() as channel:
            stub = grpcv1.FunctionRunnerServiceStub(channel)
            stub.RunFunction(pipeline.request(CLASS, tag="tag-ok"), timeout=30)
            stub.RunFunction(pipeline.request({"apiVersion": "x.org/v1", "kind": "Gadget"}, tag="tag-bad"),
                             timeout=30)
    finally:
        assert server.stop() == 0
    lines = [json.loads(line, object_pairs_hook=no_duplicate_keys) for line in server.logs().splitlines() if line]
    assert lines and all(line["target"].startswith("modelplane_function") for line in lines), \
        "--debug must not turn on every dependency's frame-level logging"
    by_tag = {}
    for line in lines:
        tag = (line.get("span") or {}).get("tag")
        by_tag.setdefault(tag, []).append(line)
    assert {"tag-ok", "tag-bad"} <= by_tag.keys()
    [failure] = [line for line in by_tag["tag-bad"] if line["level"] == "WARN"]
    assert failure["message"] == "composition failed" and "Gadget" in failure["reason"]
