package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func testServer(t *testing.T, argv []string, startup time.Duration) (*Server, *httptest.Server) {
	t.Helper()
	args, err := ParseArgs(argv)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Args: args, Metrics: NewMetrics(args.Served()[0]), Gang: NewGang(args), Started: time.Now(),
		Startup: startup, Info: func() map[string]any { return map[string]any{} }}
	h := httptest.NewServer(s.Handler(args.Headless))
	t.Cleanup(h.Close)
	return s, h
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestChatStreamEndsWithDone(t *testing.T) {
	_, h := testServer(t, []string{"serve", "m", "--served-model-name=small"}, 0)
	resp := post(t, h.URL+"/v1/chat/completions", `{"model":"small","stream":true,"max_tokens":4,
		"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var lines []string
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		if line := scanner.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	// The role, four tokens, the finish, the usage, [DONE].
	if len(lines) != 8 || lines[len(lines)-1] != "data: [DONE]" {
		t.Fatalf("stream: %q", lines)
	}
	var text strings.Builder
	for _, line := range lines[:len(lines)-1] {
		var chunk struct {
			Object  string
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &chunk); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if chunk.Object != "chat.completion.chunk" {
			t.Fatalf("object %q", chunk.Object)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
		if chunk.Usage != nil && chunk.Usage.CompletionTokens != 4 {
			t.Fatalf("usage %+v", chunk.Usage)
		}
	}
	if text.String() != "Mock vLLM small on" {
		t.Fatalf("text %q", text.String())
	}
}

func TestUnknownModelIsNotFound(t *testing.T) {
	_, h := testServer(t, []string{"serve", "m"}, 0)
	resp := post(t, h.URL+"/v1/completions", `{"model":"other","prompt":"x"}`)
	var body struct {
		Error struct{ Type, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 404 || body.Error.Type != "NotFoundError" || !strings.Contains(body.Error.Message, "other") {
		t.Fatalf("%d %+v", resp.StatusCode, body)
	}
}

func TestMetricsMoveWithRequestsAndState(t *testing.T) {
	s, h := testServer(t, []string{"serve", "m", "--served-model-name", "small"}, 0)
	post(t, h.URL+"/v1/completions", `{"prompt":"one two three","max_tokens":2}`)
	post(t, h.URL+"/mock/state", `{"waiting":6,"kvCacheUsage":0.75}`)
	resp, err := http.Get(h.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`vllm:num_requests_waiting{model_name="small",engine="0"} 6.0`,
		`vllm:kv_cache_usage_perc{model_name="small",engine="0"} 0.75`,
		`vllm:prompt_tokens_total{model_name="small",engine="0"} 3.0`,
		`vllm:generation_tokens_total{model_name="small",engine="0"} 2.0`,
		`vllm:time_to_first_token_seconds_count{model_name="small",engine="0"} 1.0`,
		`vllm:inter_token_latency_seconds_bucket{model_name="small",engine="0",le="+Inf"} 1.0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	post(t, h.URL+"/mock/state", `{"waiting":null}`)
	if _, waiting, kv, _ := s.Metrics.Gauges(); waiting != 0 || kv != 0.75 {
		t.Fatalf("waiting %v kv %v after clearing waiting", waiting, kv)
	}
}

func TestHealthFollowsTheStartupDelay(t *testing.T) {
	_, h := testServer(t, []string{"serve", "m"}, 300*time.Millisecond)
	if code := status(t, h.URL+"/health"); code != 503 {
		t.Fatalf("health %d while starting", code)
	}
	chat := post(t, h.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
	if chat.StatusCode != 503 {
		t.Fatalf("chat %d while starting", chat.StatusCode)
	}
	time.Sleep(350 * time.Millisecond)
	if code := status(t, h.URL+"/health"); code != 200 {
		t.Fatalf("health %d once started", code)
	}
	post(t, h.URL+"/mock/state", `{"healthy":false}`)
	if code := status(t, h.URL+"/health"); code != 503 {
		t.Fatalf("health %d once set unhealthy", code)
	}
}

func TestLeaderIsReadyOnlyWithEveryWorker(t *testing.T) {
	port := freePort(t)
	leaderArgs := []string{"serve", "m", "--nnodes=3", "--node-rank=0", fmt.Sprintf("--master-port=%d", port)}
	leader, h := testServer(t, leaderArgs, 0)
	if err := leader.Gang.Listen(); err != nil {
		t.Fatal(err)
	}
	for rank := 1; rank <= 2; rank++ {
		if code := status(t, h.URL+"/health"); code != 503 {
			t.Fatalf("leader health %d with %d of 2 workers", code, rank-1)
		}
		args, err := ParseArgs([]string{"serve", "m", "--nnodes=3", fmt.Sprintf("--node-rank=%d", rank),
			"--master-addr=localhost", fmt.Sprintf("--master-port=%d", port), "--headless"})
		if err != nil {
			t.Fatal(err)
		}
		worker := NewGang(args)
		if err := worker.Join(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if !worker.Complete() || !strings.HasSuffix(worker.Leader(), fmt.Sprintf(":%d", port)) {
			t.Fatalf("worker %d: complete %v, leader %q", rank, worker.Complete(), worker.Leader())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for status(t, h.URL+"/health") != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("leader not ready with both workers: %v", leader.Gang.ConnectedRanks())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkerGivesUpWithinItsBound(t *testing.T) {
	port := freePort(t) // nothing listens there
	args, _ := ParseArgs([]string{"serve", "m", "--nnodes=2", "--node-rank=1", "--master-addr=127.0.0.1",
		fmt.Sprintf("--master-port=%d", port), "--headless"})
	started := time.Now()
	err := NewGang(args).Join(time.Second)
	if err == nil || !strings.Contains(err.Error(), "could not connect to the leader") {
		t.Fatalf("error %v", err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("gave up after %s", took)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
