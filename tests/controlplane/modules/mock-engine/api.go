package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Server answers as vLLM's OpenAI server does, for the requests the tests send.
type Server struct {
	Args       *Args
	Metrics    *Metrics
	Gang       *Gang
	Started    time.Time
	Startup    time.Duration // not ready until this has passed since Started
	TokenDelay time.Duration // before each generated token
	Info       func() map[string]any
	ids        atomic.Uint64
}

// NotReady says why the engine does not take requests yet, or "" when it does.
func (s *Server) NotReady() string {
	if left := s.Startup - time.Since(s.Started); left > 0 {
		return fmt.Sprintf("starting: %.1fs of MOCK_ENGINE_STARTUP_SECONDS left", left.Seconds())
	}
	if waiting := s.Gang.Waiting(); waiting != "" {
		return waiting
	}
	if _, _, _, healthy := s.Metrics.Gauges(); !healthy {
		return "unhealthy (set through /mock/state)"
	}
	return ""
}

// Handler serves the whole API; a headless process (one with no API server in vLLM) serves only its health and
// /mock/info.
func (s *Server) Handler(headless bool) http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		if why := s.NotReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	mux.HandleFunc("GET /health", health)
	mux.HandleFunc("GET /ready", health)
	mux.HandleFunc("GET /mock/info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.Info()) })
	if headless {
		return logged(mux)
	}
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"version": version})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.Metrics.Write(w)
	})
	mux.HandleFunc("GET /mock/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.Metrics.Set(func(*Overrides) {}))
	})
	mux.HandleFunc("POST /mock/state", s.setState)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.openAI(true))
	mux.HandleFunc("POST /v1/completions", s.openAI(false))
	mux.HandleFunc("POST /v1/messages", s.messages)
	return logged(mux)
}

// logged logs every request but the probes' and scrapes'.
func logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && r.URL.Path != "/metrics" && r.URL.Path != "/ready" {
			logf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		}
		next.ServeHTTP(w, r)
	})
}

// setState merges a test's overrides (fields absent from the body are kept; null clears one).
func (s *Server) setState(w http.ResponseWriter, r *http.Request) {
	var fields map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&fields); err != nil {
		openAIError(w, 400, "BadRequestError", "body is not a JSON object: "+err.Error())
		return
	}
	var bad error
	state := s.Metrics.Set(func(o *Overrides) {
		for name, raw := range fields {
			var err error
			switch name {
			case "running":
				o.Running, err = decodePtr[float64](raw)
			case "waiting":
				o.Waiting, err = decodePtr[float64](raw)
			case "kvCacheUsage":
				o.KVCacheUsage, err = decodePtr[float64](raw)
			case "healthy":
				o.Healthy, err = decodePtr[bool](raw)
			default:
				err = fmt.Errorf("unknown field %q (running, waiting, kvCacheUsage, healthy)", name)
			}
			if err != nil && bad == nil {
				bad = err
			}
		}
	})
	if bad != nil {
		openAIError(w, 400, "BadRequestError", bad.Error())
		return
	}
	logf("state set: %s", mustJSON(state))
	writeJSON(w, 200, state)
}

func decodePtr[T any](raw json.RawMessage) (*T, error) {
	var v *T
	err := json.Unmarshal(raw, &v)
	return v, err
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !s.serving(w, openAIError) {
		return
	}
	var data []map[string]any
	for _, name := range s.Args.Served() {
		data = append(data, map[string]any{"id": name, "object": "model", "created": s.Started.Unix(),
			"owned_by": "vllm", "root": s.Args.Model, "parent": nil, "max_model_len": 32768})
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}

// serving answers 503 while the engine is not ready (vLLM does not listen yet then; the mock says why).
func (s *Server) serving(w http.ResponseWriter, fail func(http.ResponseWriter, int, string, string)) bool {
	if why := s.NotReady(); why != "" {
		fail(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the engine is not ready: "+why)
		return false
	}
	return true
}

// apiErrors is how one API answers a bad body and an unknown model.
type apiErrors struct {
	write                func(w http.ResponseWriter, code int, kind, msg string)
	badBody, noSuchModel string
}

var (
	openAIErrors    = apiErrors{openAIError, "BadRequestError", "NotFoundError"}
	anthropicErrors = apiErrors{anthropicError, "invalid_request_error", "not_found_error"}
)

// decode reads the body into req and checks the model it names (*model, a field of req) against the served
// names, an empty one meaning the first, as vLLM takes it; it answers the error itself when either fails.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, req any, model *string, errs apiErrors) bool {
	if err := json.NewDecoder(r.Body).Decode(req); err != nil {
		errs.write(w, 400, errs.badBody, "the body is not a valid request: "+err.Error())
		return false
	}
	served := s.Args.Served()
	if *model == "" {
		*model = served[0]
	}
	if !slices.Contains(served, *model) {
		errs.write(w, 404, errs.noSuchModel, fmt.Sprintf("The model `%s` does not exist.", *model))
		return false
	}
	return true
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text reads a content that is a string or a list of parts with `text`, as OpenAI and Anthropic both allow.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, " ")
}

// generation is one request's answer: its tokens (words with their spaces) and why it stopped.
type generation struct {
	model   string
	prompt  int
	tokens  []string
	finish  string // "stop" or "length"
	started time.Time
	ttft    float64
	itl     []float64
	done    func() // counts the request out of the running ones
}

const defaultMaxTokens = 64

// answer makes the reply to `prompt`: a fixed greeting naming the model and rank, then the prompt's words echoed,
// cut at maxTokens (finish "length") or complete (finish "stop"). One word is one token.
func (s *Server) answer(model, prompt string, maxTokens *int) *generation {
	words := strings.Fields(fmt.Sprintf("Mock vLLM %s on rank %d heard: %s", model, s.Args.NodeRank, prompt))
	limit := defaultMaxTokens
	if maxTokens != nil && *maxTokens > 0 {
		limit = *maxTokens
	}
	g := &generation{model: model, prompt: max(1, len(strings.Fields(prompt))), finish: "stop", started: time.Now(),
		done: s.Metrics.Start()}
	if len(words) > limit {
		words, g.finish = words[:limit], "length"
	}
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		g.tokens = append(g.tokens, word)
	}
	return g
}

// run emits the tokens one at a time, TokenDelay apart, and records the request in the metrics.
func (s *Server) run(ctx context.Context, g *generation, emit func(token string)) error {
	defer g.done()
	last := g.started
	for i, token := range g.tokens {
		select {
		case <-ctx.Done():
			s.Metrics.Finished(g.prompt, i, "abort", 0, nil, time.Since(g.started).Seconds())
			return ctx.Err()
		case <-time.After(s.TokenDelay):
		}
		now := time.Now()
		if i == 0 {
			g.ttft = now.Sub(g.started).Seconds()
		} else {
			g.itl = append(g.itl, now.Sub(last).Seconds())
		}
		last = now
		emit(token)
	}
	s.Metrics.Finished(g.prompt, len(g.tokens), g.finish, g.ttft, g.itl, time.Since(g.started).Seconds())
	return nil
}

func (g *generation) usage() map[string]int {
	return map[string]int{"prompt_tokens": g.prompt, "completion_tokens": len(g.tokens),
		"total_tokens": g.prompt + len(g.tokens)}
}

// openAI serves /v1/chat/completions (chat) and /v1/completions.
func (s *Server) openAI(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.serving(w, openAIError) {
			return
		}
		var req struct {
			Model               string          `json:"model"`
			Messages            []message       `json:"messages"`
			Prompt              json.RawMessage `json:"prompt"`
			Stream              bool            `json:"stream"`
			MaxTokens           *int            `json:"max_tokens"`
			MaxCompletionTokens *int            `json:"max_completion_tokens"`
			StreamOptions       struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if !s.decode(w, r, &req, &req.Model, openAIErrors) {
			return
		}
		model := req.Model
		var prompt []string
		if chat {
			if len(req.Messages) == 0 {
				openAIError(w, 400, "BadRequestError", "messages: at least one message is required")
				return
			}
			for _, m := range req.Messages {
				prompt = append(prompt, text(m.Content))
			}
		} else {
			var many []string
			if json.Unmarshal(req.Prompt, &many) != nil {
				many = []string{text(req.Prompt)}
			}
			prompt = many
		}
		limit := req.MaxTokens
		if req.MaxCompletionTokens != nil {
			limit = req.MaxCompletionTokens
		}
		g := s.answer(model, strings.Join(prompt, " "), limit)
		kind, prefix := "text_completion", "cmpl-mock-"
		if chat {
			kind, prefix = "chat.completion", "chatcmpl-mock-"
		}
		id, created := fmt.Sprintf("%s%d", prefix, s.ids.Add(1)), time.Now().Unix()
		if !req.Stream {
			var all strings.Builder
			_ = s.run(r.Context(), g, func(t string) { all.WriteString(t) })
			choice := map[string]any{"index": 0, "finish_reason": g.finish, "logprobs": nil}
			if chat {
				choice["message"] = map[string]any{"role": "assistant", "content": all.String()}
			} else {
				choice["text"] = all.String()
			}
			writeJSON(w, 200, map[string]any{"id": id, "object": kind, "created": created, "model": model,
				"choices": []any{choice}, "usage": g.usage()})
			return
		}
		// Chat chunks carry a delta (the role first, then the content); completion chunks carry text.
		chunkKind := kind
		if chat {
			chunkKind = "chat.completion.chunk"
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			choice := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil}
			if chat {
				choice["delta"] = delta
			} else {
				text, _ := delta["content"].(string)
				choice["text"] = text
			}
			return map[string]any{"id": id, "object": chunkKind, "created": created, "model": model,
				"choices": []any{choice}}
		}
		sse := startSSE(w)
		if chat {
			sse.data(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		}
		if s.run(r.Context(), g, func(t string) { sse.data(chunk(map[string]any{"content": t}, nil)) }) != nil {
			return
		}
		sse.data(chunk(map[string]any{}, g.finish))
		if req.StreamOptions.IncludeUsage {
			sse.data(map[string]any{"id": id, "object": chunkKind, "created": created, "model": model,
				"choices": []any{}, "usage": g.usage()})
		}
		sse.raw("data: [DONE]\n\n")
	}
}

// messages serves Anthropic's Messages API (/v1/messages), as vLLM does.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	if !s.serving(w, anthropicError) {
		return
	}
	var req struct {
		Model     string          `json:"model"`
		System    json.RawMessage `json:"system"`
		Messages  []message       `json:"messages"`
		MaxTokens *int            `json:"max_tokens"`
		Stream    bool            `json:"stream"`
	}
	if !s.decode(w, r, &req, &req.Model, anthropicErrors) {
		return
	}
	model := req.Model
	if req.MaxTokens == nil || len(req.Messages) == 0 {
		anthropicError(w, 400, "invalid_request_error", "max_tokens and at least one message are required")
		return
	}
	prompt := []string{text(req.System)}
	for _, m := range req.Messages {
		prompt = append(prompt, text(m.Content))
	}
	g := s.answer(model, strings.TrimSpace(strings.Join(prompt, " ")), req.MaxTokens)
	id := fmt.Sprintf("msg_mock_%d", s.ids.Add(1))
	stop := map[string]string{"stop": "end_turn", "length": "max_tokens"}
	message := func(content []any, stopReason any, output int) map[string]any {
		return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
			"stop_reason": stopReason, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": g.prompt, "output_tokens": output}}
	}
	if !req.Stream {
		var all strings.Builder
		_ = s.run(r.Context(), g, func(t string) { all.WriteString(t) })
		writeJSON(w, 200, message([]any{map[string]any{"type": "text", "text": all.String()}}, stop[g.finish],
			len(g.tokens)))
		return
	}
	sse := startSSE(w)
	sse.event("message_start", map[string]any{"type": "message_start", "message": message([]any{}, nil, 0)})
	sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	sse.event("ping", map[string]any{"type": "ping"})
	if s.run(r.Context(), g, func(t string) {
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": t}})
	}) != nil {
		return
	}
	sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop[g.finish], "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": len(g.tokens)}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

type sseWriter struct {
	w http.ResponseWriter
	c *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, c: http.NewResponseController(w)}
}

func (s *sseWriter) raw(text string) {
	_, _ = s.w.Write([]byte(text))
	_ = s.c.Flush()
}

func (s *sseWriter) data(v any) { s.raw("data: " + mustJSON(v) + "\n\n") }

func (s *sseWriter) event(name string, v any) {
	s.raw("event: " + name + "\ndata: " + mustJSON(v) + "\n\n")
}

// openAIError answers in OpenAI's error shape, as vLLM does.
func openAIError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": kind, "param": nil,
		"code": code}})
}

// anthropicError answers in Anthropic's error shape (its own error type names).
func anthropicError(w http.ResponseWriter, code int, kind, msg string) {
	if kind == "ServiceUnavailableError" {
		kind = "overloaded_error"
	}
	writeJSON(w, code, map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append([]byte(mustJSON(v)), '\n'))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
