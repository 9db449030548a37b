package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsesTheSeedLeaderAndWorkerCommands(t *testing.T) {
	// What `/bin/sh -c "exec vllm serve ..."` in examples/deployments/qwen3-coder.yaml hands the binary, once the
	// kubelet expanded $(MODELPLANE_LEADER_ADDRESS).
	leader := strings.Fields(`serve Qwen/Qwen3-Coder-480B-A35B-Instruct --served-model-name=qwen3-coder
		--tensor-parallel-size=8 --pipeline-parallel-size=2 --distributed-executor-backend=mp --nnodes=2
		--node-rank=0 --master-addr=qwen3-coder-0.qwen3-coder.ml-team --max-model-len=32768 --port=8000`)
	a, err := ParseArgs(leader)
	if err != nil {
		t.Fatal(err)
	}
	want := &Args{Model: "Qwen/Qwen3-Coder-480B-A35B-Instruct", ServedModelNames: []string{"qwen3-coder"},
		Port: 8000, NNodes: 2, NodeRank: 0, MasterAddr: "qwen3-coder-0.qwen3-coder.ml-team", MasterPort: 29501,
		DataParallel: map[string]string{}, Ignored: []string{"--tensor-parallel-size=8",
			"--pipeline-parallel-size=2", "--distributed-executor-backend=mp", "--max-model-len=32768"}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("leader:\n got %+v\nwant %+v", a, want)
	}
	worker := append(strings.Fields(`serve Qwen/Qwen3-Coder-480B-A35B-Instruct --served-model-name=qwen3-coder
		--nnodes 2 --node-rank 1 --master-addr 10.244.0.7 --master-port 29600 --headless`), "--max-model-len", "32768")
	if a, err = ParseArgs(worker); err != nil {
		t.Fatal(err)
	}
	if a.NodeRank != 1 || a.NNodes != 2 || !a.Headless || a.MasterAddr != "10.244.0.7" || a.MasterPort != 29600 ||
		!reflect.DeepEqual(a.Ignored, []string{"--max-model-len 32768"}) {
		t.Fatalf("worker: %+v", a)
	}
}

func TestParsesTheOpenAIServerForm(t *testing.T) {
	// The image's entrypoint given only args (examples/deployments/qwen3-small.yaml): no `serve`, --model.
	a, err := ParseArgs([]string{"--model=Qwen/Qwen3-0.6B", "--served-model-name", "qwen3-small", "small",
		"--served-model-name=alias,other", "--port=8001", "--host", "0.0.0.0", "--enforce-eager",
		"--data-parallel-size=2", "--data-parallel-hybrid-lb", "--kv-transfer-config={\"kv_role\":\"kv_both\"}"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Model != "Qwen/Qwen3-0.6B" || a.Port != 8001 || a.Host != "0.0.0.0" ||
		!reflect.DeepEqual(a.Served(), []string{"qwen3-small", "small", "alias", "other"}) ||
		!reflect.DeepEqual(a.DataParallel, map[string]string{"--data-parallel-size": "2",
			"--data-parallel-hybrid-lb": "true"}) ||
		!reflect.DeepEqual(a.Ignored, []string{"--enforce-eager", "--kv-transfer-config={\"kv_role\":\"kv_both\"}"}) {
		t.Fatalf("%+v", a)
	}
}

func TestDefaultsAreVLLMs(t *testing.T) {
	a, err := ParseArgs([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Model != defaultModel || !reflect.DeepEqual(a.Served(), []string{defaultModel}) || a.Port != 8000 ||
		a.NNodes != 1 || a.MasterPort != 29501 || a.MasterAddr != "127.0.0.1" || a.Headless {
		t.Fatalf("%+v", a)
	}
}

func TestRejectsWhatVLLMWouldRefuse(t *testing.T) {
	for _, argv := range [][]string{
		{"serve", "m", "--port=eighty"},
		{"serve", "m", "--nnodes=2", "--node-rank=2"},
		{"serve", "m", "--node-rank"},
		{"serve", "m", "--served-model-name", "--port=1"},
		{"serve", "m", "stray"},
	} {
		if _, err := ParseArgs(argv); err == nil {
			t.Errorf("%q was accepted", argv)
		}
	}
}
