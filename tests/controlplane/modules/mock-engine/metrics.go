package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Buckets as vLLM's (vllm/v1/metrics/loggers.py), for time to first token and between tokens.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
		20, 40, 80, 160, 640, 2560}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20,
		40, 80}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960,
		1920, 7680}
)

type histogram struct {
	bounds []float64
	counts []uint64 // per bound, not cumulative
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += v
}

// Overrides a test sets through POST /mock/state; a nil field reports what the mock really does.
type Overrides struct {
	Running      *float64 `json:"running"`
	Waiting      *float64 `json:"waiting"`
	KVCacheUsage *float64 `json:"kvCacheUsage"`
	// Healthy false makes /health answer 503 even once started, as an engine whose core died does.
	Healthy *bool `json:"healthy"`
}

// Metrics is what the engine reports on /metrics, under vLLM's names and its `model_name` and `engine` labels.
type Metrics struct {
	mu               sync.Mutex
	model            string // vLLM labels its series with the first served name
	running          int    // requests being answered now
	overrides        Overrides
	promptTokens     uint64
	generationTokens uint64
	success          map[string]uint64 // by finished_reason
	ttft, itl, e2e   *histogram
}

func NewMetrics(model string) *Metrics {
	return &Metrics{model: model, success: map[string]uint64{}, ttft: newHistogram(ttftBuckets),
		itl: newHistogram(itlBuckets), e2e: newHistogram(e2eBuckets)}
}

// Start counts a request in; the function it returns counts it out.
func (m *Metrics) Start() func() {
	m.mu.Lock()
	m.running++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.running--
		m.mu.Unlock()
	}
}

// Finished records one answered request.
func (m *Metrics) Finished(prompt, generated int, reason string, ttft float64, itl []float64, e2e float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptTokens += uint64(prompt)
	m.generationTokens += uint64(generated)
	m.success[reason]++
	m.ttft.observe(ttft)
	for _, v := range itl {
		m.itl.observe(v)
	}
	m.e2e.observe(e2e)
}

// Set merges overrides: a field present in the JSON replaces the one held (null clears it).
func (m *Metrics) Set(apply func(*Overrides)) Overrides {
	m.mu.Lock()
	defer m.mu.Unlock()
	apply(&m.overrides)
	return m.overrides
}

// Gauges are the queue figures reported now: the overrides, else the requests in flight.
func (m *Metrics) Gauges() (running, waiting, kv float64, healthy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	running, waiting, kv, healthy = float64(m.running), 0, 0.05*float64(m.running), true
	if kv > 1 {
		kv = 1
	}
	if o := m.overrides.Running; o != nil {
		running = *o
	}
	if o := m.overrides.Waiting; o != nil {
		waiting = *o
	}
	if o := m.overrides.KVCacheUsage; o != nil {
		kv = *o
	}
	if o := m.overrides.Healthy; o != nil {
		healthy = *o
	}
	return running, waiting, kv, healthy
}

// number spells a value as vLLM's Python client does: whole numbers with ".0" (so `le="1.0"`, as vLLM writes it).
func number(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return strconv.FormatInt(int64(v), 10) + ".0"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Write puts the metrics in Prometheus' text format.
func (m *Metrics) Write(w io.Writer) {
	running, waiting, kv, _ := m.Gauges()
	m.mu.Lock()
	defer m.mu.Unlock()
	labels := fmt.Sprintf(`model_name=%q,engine="0"`, m.model)
	var b strings.Builder
	family := func(name, kind, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind) }
	sample := func(name, extra string, v float64) { fmt.Fprintf(&b, "%s{%s%s} %s\n", name, labels, extra, number(v)) }
	family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
	sample("vllm:num_requests_running", "", running)
	family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
	sample("vllm:num_requests_waiting", "", waiting)
	family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
	sample("vllm:kv_cache_usage_perc", "", kv)
	family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
	sample("vllm:prompt_tokens_total", "", float64(m.promptTokens))
	family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.")
	sample("vllm:generation_tokens_total", "", float64(m.generationTokens))
	family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
	for _, reason := range []string{"stop", "length", "abort"} {
		sample("vllm:request_success_total", fmt.Sprintf(",finished_reason=%q", reason), float64(m.success[reason]))
	}
	hist := func(name, help string, h *histogram) {
		family(name, "histogram", help)
		var cumulative uint64
		for i, bound := range h.bounds {
			cumulative += h.counts[i]
			sample(name+"_bucket", fmt.Sprintf(",le=%q", number(bound)), float64(cumulative))
		}
		sample(name+"_bucket", `,le="+Inf"`, float64(h.count))
		sample(name+"_count", "", float64(h.count))
		sample(name+"_sum", "", h.sum)
	}
	hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
	hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl)
	hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e)
	io.WriteString(w, b.String())
}
