"""The engines' recording rules, run by Prometheus' own rule engine: the PrometheusRule an example cluster composes is
loaded by `promtool test rules` (built pinned with the control plane) and fed what vLLM, SGLang and TensorRT-LLM
pods expose, under each engine's own names; the `modelplane_*` series must come out with the pod's labels only,
one per serving pod, and with no series for a figure an engine does not report. No API server is needed."""

from __future__ import annotations

import subprocess

import installs
import yaml
from kube import REPO_ROOT

CLUSTER = REPO_ROOT / "examples" / "clusters" / "eks-h200-us-east.yaml"
PROMTOOL = REPO_ROOT / "tests" / "controlplane" / ".bin" / "promtool"

# The labels the scrape gives every engine pod; each pod below adds `pod` and its engine's own labels.
WHERE = 'cluster="use1",namespace="ml-team",deployment="qwen",replica="0"'


def series(name: str, pod: str, values: str, **engine_labels: str) -> dict:
    extra = "".join(f',{k}="{v}"' for k, v in engine_labels.items())
    return {"series": f'{name}{{{WHERE},pod="{pod}"{extra}}}', "values": values}


def sample(name: str, pod: str, value: float, **labels: str) -> dict:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return {"labels": f'{name}{{{WHERE},pod="{pod}"{extra}}}', "value": value}


def rounded(expr: str) -> str:
    return f"round({expr}, 0.001)"


def composed_rules() -> dict:
    documents = installs.render(CLUSTER, REPO_ROOT / "examples" / "classes", until_ready=True)
    [rule] = [d["spec"]["forProvider"]["manifest"] for d in documents[1:]
              if d.get("kind") == "Object" and d["spec"]["forProvider"]["manifest"]["kind"] == "PrometheusRule"]
    return {"groups": rule["spec"]["groups"]}


def test_every_engines_figures_come_out_under_one_name_per_pod(tmp_path):
    assert PROMTOOL.is_file(), f"no promtool at {PROMTOOL}: run `bash tests/controlplane/controlplane.sh build`"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(composed_rules()))
    vllm, sglang, trtllm, dp = ({"model_name": "Qwen/Qwen3"} | extra for extra in (
        {"engine": "0"}, {}, {"engine_type": "trtllm"}, {}))
    inputs = [
        # vLLM, reporting both KV-cache names as releases around the rename do: the newer one counts.
        series("vllm:num_requests_running", "vllm-pod", "3x8", **vllm),
        series("vllm:num_requests_waiting", "vllm-pod", "5x8", **vllm),
        series("vllm:kv_cache_usage_perc", "vllm-pod", "0.5x8", **vllm),
        series("vllm:gpu_cache_usage_perc", "vllm-pod", "0.9x8", **vllm),
        series("vllm:prompt_tokens_total", "vllm-pod", "0+150x8", **vllm),
        series("vllm:generation_tokens_total", "vllm-pod", "0+300x8", **vllm),
        # Its per-token latency under the new name and, with other buckets, the old: only the new one counts.
        series("vllm:inter_token_latency_seconds_bucket", "vllm-pod", "0+15x8", le="0.05", **vllm),
        series("vllm:inter_token_latency_seconds_bucket", "vllm-pod", "0+30x8", le="+Inf", **vllm),
        series("vllm:time_per_output_token_seconds_bucket", "vllm-pod", "0+15x8", le="0.02", **vllm),
        series("vllm:time_per_output_token_seconds_bucket", "vllm-pod", "0+30x8", le="+Inf", **vllm),
        # SGLang, under its own names.
        series("sglang:num_running_reqs", "sglang-pod", "2x8", **sglang),
        series("sglang:num_queue_reqs", "sglang-pod", "7x8", **sglang),
        series("sglang:token_usage", "sglang-pod", "0.25x8", **sglang),
        # TensorRT-LLM reports latencies only.
        series("trtllm_time_to_first_token_seconds_bucket", "trtllm-pod", "0+15x8", le="0.1", **trtllm),
        series("trtllm_time_to_first_token_seconds_bucket", "trtllm-pod", "0+30x8", le="+Inf", **trtllm),
        # A data-parallel vLLM pod: two engines, their queues summed and their KV-cache use averaged.
        series("vllm:num_requests_running", "dp-pod", "1x8", engine="0", **dp),
        series("vllm:num_requests_running", "dp-pod", "2x8", engine="1", **dp),
        series("vllm:kv_cache_usage_perc", "dp-pod", "0.2x8", engine="0", **dp),
        series("vllm:kv_cache_usage_perc", "dp-pod", "0.4x8", engine="1", **dp),
    ]
    at = "2m"
    expected = [
        ("modelplane_requests_running", [sample("modelplane_requests_running", "dp-pod", 3),
                                         sample("modelplane_requests_running", "sglang-pod", 2),
                                         sample("modelplane_requests_running", "vllm-pod", 3)]),
        ("modelplane_requests_waiting", [sample("modelplane_requests_waiting", "sglang-pod", 7),
                                         sample("modelplane_requests_waiting", "vllm-pod", 5)]),
        # Averages and rates are compared to a thousandth (round drops the name).
        (rounded("modelplane_kv_cache_utilization"), [sample("", "dp-pod", 0.3), sample("", "sglang-pod", 0.25),
                                                      sample("", "vllm-pod", 0.5)]),
        # 150 and 300 tokens every 15 s scrape.
        (rounded("modelplane_prompt_tokens:rate1m"), [sample("", "vllm-pod", 10)]),
        (rounded("modelplane_generation_tokens:rate1m"), [sample("", "vllm-pod", 20)]),
        (rounded("modelplane_time_to_first_token_seconds_bucket:rate1m"), [
            sample("", "trtllm-pod", 1, le="0.1"), sample("", "trtllm-pod", 2, le="+Inf")]),
        # What a status figure or a dashboard reads: half the first tokens came within 0.1 s.
        (rounded("histogram_quantile(0.5, sum by (le) (modelplane_time_to_first_token_seconds_bucket:rate1m))"),
         [{"labels": "{}", "value": 0.1}]),
        (rounded("modelplane_time_per_output_token_seconds_bucket:rate1m"), [
            sample("", "vllm-pod", 1, le="0.05"), sample("", "vllm-pod", 2, le="+Inf")]),
    ]
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "15s", "tests": [{
        "interval": "15s",
        "input_series": inputs,
        "promql_expr_test": [{"expr": expr, "eval_time": at, "exp_samples": samples} for expr, samples in expected],
    }]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run([str(PROMTOOL), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_gpu_figures_follow_the_pod_holding_each_device(tmp_path):
    """DCGM's per-device series, attributed to their holder's pod by the exporter, are joined to the engine scrape's
    targets: they gain the deployment's labels, are averaged (utilisation) or summed (memory) over the pod's GPUs,
    and a device held by no serving pod records nothing."""
    assert PROMTOOL.is_file(), f"no promtool at {PROMTOOL}: run `bash tests/controlplane/controlplane.sh build`"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(composed_rules()))
    exporter = {"job": "dcgm-exporter", "instance": "10.0.0.9:9400", "modelName": "NVIDIA H200"}

    def device(name: str, gpu: str, values: str, **holder: str) -> dict:
        labels = exporter | {"gpu": gpu, "UUID": f"GPU-{gpu}"} | holder
        return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}

    inputs = [
        # The engine scrape's targets: the decode pod's scrape is failing, which must not zero its GPUs' figures.
        series("up", "vllm-pod", "1x8", job="modelplane-engine", instance="10.0.1.1:8000"),
        series("up", "decode-pod", "0x8", job="modelplane-engine", instance="10.0.1.2:8001", role="decode"),
        # The same pod name scraped by some other job is no serving pod.
        {"series": 'up{job="other",namespace="tools",pod="tool-pod"}', "values": "1x8"},
        # The chart's exporter with `honorLabels`: the holder's own labels.
        device("DCGM_FI_DEV_GPU_UTIL", "0", "80x8", namespace="ml-team", pod="vllm-pod", container="engine"),
        device("DCGM_FI_DEV_GPU_UTIL", "1", "60x8", namespace="ml-team", pod="vllm-pod", container="engine"),
        device("DCGM_FI_DEV_FB_USED", "0", "1000x8", namespace="ml-team", pod="vllm-pod", container="engine"),
        device("DCGM_FI_DEV_FB_USED", "1", "2000x8", namespace="ml-team", pod="vllm-pod", container="engine"),
        # The GPU Operator's exporter, without it: the holder under `exported_*`, the exporter's pod as `pod`.
        device("DCGM_FI_DEV_GPU_UTIL", "2", "40x8", namespace="gpu-operator", pod="nvidia-dcgm-exporter-x",
               exported_namespace="ml-team", exported_pod="decode-pod", container="engine"),
        # Held by nobody, held by a pod of the same name in another namespace, held by a tool: none recorded.
        device("DCGM_FI_DEV_GPU_UTIL", "3", "100x8", namespace="monitoring", pod="dcgm-exporter-y"),
        device("DCGM_FI_DEV_GPU_UTIL", "4", "90x8", namespace="other", pod="vllm-pod"),
        device("DCGM_FI_DEV_GPU_UTIL", "5", "70x8", namespace="tools", pod="tool-pod"),
    ]
    expected = [
        (rounded("modelplane_gpu_utilization"), [sample("", "decode-pod", 0.4, role="decode"),
                                                 sample("", "vllm-pod", 0.7)]),
        # 3000 MiB in bytes.
        ("modelplane_gpu_memory_used_bytes", [sample("modelplane_gpu_memory_used_bytes", "vllm-pod", 3145728000)]),
    ]
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "15s", "tests": [{
        "interval": "15s",
        "input_series": inputs,
        "promql_expr_test": [{"expr": expr, "eval_time": "1m", "exp_samples": samples} for expr, samples in expected],
    }]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run([str(PROMTOOL), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_are_valid_for_prometheus(tmp_path):
    """`promtool check rules`: the same parser and checks Prometheus applies when it loads the rule file."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(composed_rules()))
    done = subprocess.run([str(PROMTOOL), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout, done.stdout
