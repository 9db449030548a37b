// ask-picker asks an endpoint picker, over Envoy's external processing protocol (the gRPC stream Envoy opens for
// every request to an InferencePool), which endpoint it picks for one request, as Envoy would: the request's
// headers, then its body, then whatever the picker answers until it has answered the body. It prints one JSON
// object: the endpoint the picker set (x-gateway-destination-endpoint, from its header mutation or its envoy.lb
// dynamic metadata), every header it set, and an immediate response (a refusal) if it sent one.
//
//	ask-picker -addr 127.0.0.1:9002 -path /v1/completions -body '{"model": "m", "prompt": "hi"}'
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

const endpointKey = "x-gateway-destination-endpoint"

type answer struct {
	Endpoint  string            `json:"endpoint"`
	Headers   map[string]string `json:"headers"`
	Metadata  map[string]any    `json:"metadata,omitempty"`
	Immediate map[string]any    `json:"immediate,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9002", "the picker's ext-proc address")
	plaintext := flag.Bool("plaintext", false, "no TLS (the picker's --secure-serving=false)")
	path := flag.String("path", "/v1/completions", "the request's path")
	body := flag.String("body", "{}", "the request's JSON body")
	timeout := flag.Duration("timeout", 10*time.Second, "bound on the whole exchange")
	flag.Parse()
	got, err := ask(*addr, *plaintext, *path, []byte(*body), *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ask-picker:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(got)
	fmt.Println(string(out))
}

func ask(addr string, plaintext bool, path string, body []byte, timeout time.Duration) (*answer, error) {
	// The picker serves a self-signed certificate unless told otherwise; Envoy Gateway does not check it either.
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test peer on loopback
	if plaintext {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stream, err := extproc.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening the stream: %w", err)
	}
	header := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	headers := &extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extproc.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			header(":method", "POST"), header(":path", path), header(":authority", "picker.test"),
			header(":scheme", "http"), header("content-type", "application/json"),
			header("content-length", fmt.Sprint(len(body))),
		}}},
	}}
	bodyReq := &extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestBody{
		RequestBody: &extproc.HttpBody{Body: body, EndOfStream: true},
	}}
	for _, req := range []*extproc.ProcessingRequest{headers, bodyReq} {
		if err := stream.Send(req); err != nil {
			return nil, fmt.Errorf("sending: %w", err)
		}
	}
	got := &answer{Headers: map[string]string{}}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("receiving (after %d headers): %w", len(got.Headers), err)
		}
		if md := resp.GetDynamicMetadata(); md != nil {
			got.Metadata = md.AsMap()
			if lb, ok := got.Metadata["envoy.lb"].(map[string]any); ok {
				if ep, ok := lb[endpointKey].(string); ok && got.Endpoint == "" {
					got.Endpoint = ep
				}
			}
		}
		if imm := resp.GetImmediateResponse(); imm != nil {
			got.Immediate = map[string]any{"status": imm.GetStatus().GetCode().String(), "body": string(imm.GetBody()),
				"details": imm.GetDetails()}
			return got, nil
		}
		var common *extproc.CommonResponse
		switch r := resp.Response.(type) {
		case *extproc.ProcessingResponse_RequestHeaders:
			common = r.RequestHeaders.GetResponse()
		case *extproc.ProcessingResponse_RequestBody:
			common = r.RequestBody.GetResponse()
		}
		for _, h := range common.GetHeaderMutation().GetSetHeaders() {
			value := h.GetHeader().GetValue()
			if value == "" {
				value = string(h.GetHeader().GetRawValue())
			}
			got.Headers[h.GetHeader().GetKey()] = value
			if h.GetHeader().GetKey() == endpointKey {
				got.Endpoint = value
			}
		}
		if _, ok := resp.Response.(*extproc.ProcessingResponse_RequestBody); ok {
			return got, nil
		}
	}
}
