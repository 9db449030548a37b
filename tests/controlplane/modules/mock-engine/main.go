// Command mock-engine stands in for vLLM in the test cluster's images, installed as `vllm` so the commands users
// write run unchanged. See README.md for its interface.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const version = "0.0.0+modelplane.mock"

// The environment a test sets.
const (
	envStartup       = "MOCK_ENGINE_STARTUP_SECONDS"        // not ready until this many seconds passed (default 0)
	envLeaderTimeout = "MOCK_ENGINE_LEADER_TIMEOUT_SECONDS" // a worker's bound to reach its leader (default 300)
	envInfoPort      = "MOCK_ENGINE_INFO_PORT"              // a headless process's HTTP port (default 8000)
	envTokenSeconds  = "MOCK_ENGINE_TOKEN_SECONDS"          // pause before each generated token (default 0.002)
	envDeviceFiles   = "MOCK_ENGINE_DEVICE_FILES"           // glob of device files /mock/info shows
	envRank          = "MODELPLANE_RANK"                    // what our composed pods set
)

// Where the test DRA driver's CDI spec mounts each prepared claim's devices (tests/controlplane/modules/dra-driver).
const defaultDeviceFiles = "/var/run/modelplane-dra/*.json"

// The environment /mock/info reports: ours, what DRA drivers inject, and what LWS and Grove set.
var envPrefixes = []string{"MODELPLANE_", "GPU_DEVICE_", "DRA_", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
	"LWS_", "GROVE_"}

func logf(format string, args ...any) { log.Printf(format, args...) }

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	log.SetPrefix("mock-engine: ")
	if err := run(os.Args[1:]); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

func run(argv []string) error {
	rank, rankSet := os.LookupEnv(envRank)
	if !rankSet {
		rank = "(unset)"
	}
	logf("starting as MODELPLANE_RANK=%s with argv %s", rank, mustJSON(os.Args))
	if len(argv) == 1 && (argv[0] == "--version" || argv[0] == "-v") {
		fmt.Println(version)
		return nil
	}
	args, err := ParseArgs(argv)
	if err != nil {
		log.Printf("error: %v", err)
		os.Exit(2) // as argparse exits on a bad command line
	}
	for _, flag := range args.Ignored {
		logf("warning: ignoring %s (the mock does not act on it)", flag)
	}
	startup, err1 := seconds(envStartup, 0)
	leaderTimeout, err2 := seconds(envLeaderTimeout, 300)
	tokenDelay, err3 := seconds(envTokenSeconds, 0.002)
	infoPort, err4 := integer(envInfoPort, defaultPort)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	gang := NewGang(args)
	server := &Server{Args: args, Metrics: NewMetrics(args.Served()[0]), Gang: gang, Started: time.Now(),
		Startup: startup, TokenDelay: tokenDelay}
	port := args.Port
	if args.Headless {
		port = infoPort
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(args.Host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	server.Info = func() map[string]any { return info(args, server, listener.Addr().String()) }
	what := "the OpenAI API"
	if args.Headless {
		what = "/health and /mock/info (headless)"
	}
	logf("serving %v as rank %d of %d: %s on %s", args.Served(), args.NodeRank, args.NNodes, what, listener.Addr())
	if startup > 0 {
		logf("not ready for %s (%s)", startup, envStartup)
	}
	httpServer := &http.Server{Handler: server.Handler(args.Headless), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(listener) }()
	if err := gang.Listen(); err != nil {
		return err
	}
	joined := make(chan error, 1)
	go func() { joined <- gang.Join(leaderTimeout) }()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case err := <-joined:
			if err != nil {
				return err
			}
		case err := <-served:
			return fmt.Errorf("HTTP server: %w", err)
		case sig := <-signals:
			logf("%s: shutting down", sig)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = httpServer.Shutdown(ctx)
			return nil
		}
	}
}

func seconds(name string, fallback float64) (time.Duration, error) {
	v := fallback
	if s, ok := os.LookupEnv(name); ok && s != "" {
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil || v < 0 {
			return 0, fmt.Errorf("%s=%q: not a number of seconds", name, s)
		}
	}
	return time.Duration(v * float64(time.Second)), nil
}

func integer(name string, fallback int) (int, error) {
	if s, ok := os.LookupEnv(name); ok && s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 65535 {
			return 0, fmt.Errorf("%s=%q: not a port", name, s)
		}
		return v, nil
	}
	return fallback, nil
}

// info is what GET /mock/info answers: how this process was started and what it sees of its pod.
func info(args *Args, s *Server, listen string) map[string]any {
	host, _ := os.Hostname()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		for _, prefix := range envPrefixes {
			if strings.HasPrefix(name, prefix) {
				env[name] = value
			}
		}
	}
	var rank any
	if v, ok := os.LookupEnv(envRank); ok {
		rank = v
	}
	role := "standalone"
	switch {
	case args.NNodes > 1 && args.NodeRank == 0:
		role = "leader"
	case args.NodeRank > 0:
		role = "worker"
	}
	resolved, resolveErr := []string{}, ""
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ips, err := net.DefaultResolver.LookupHost(ctx, args.MasterAddr); err == nil {
		resolved = ips
	} else {
		resolveErr = err.Error()
	}
	ranks := s.Gang.ConnectedRanks()
	connected := make([]int, 0, len(ranks))
	for r := range ranks {
		n, _ := strconv.Atoi(r)
		connected = append(connected, n)
	}
	sort.Ints(connected)
	why := s.NotReady()
	return map[string]any{
		"servedModels": args.Served(), "model": args.Model, "role": role, "headless": args.Headless,
		"nodeRank": args.NodeRank, "nnodes": args.NNodes, "modelplaneRank": rank,
		"masterAddr": args.MasterAddr, "masterPort": args.MasterPort, "masterAddrResolved": resolved,
		"masterAddrResolveError": resolveErr, "leaderConnection": s.Gang.Leader(),
		"connectedRanks": connected, "connectedHosts": ranks,
		"ready": why == "", "notReady": why, "hostname": host, "listen": listen, "argv": os.Args,
		"ignoredFlags": args.Ignored, "dataParallel": args.DataParallel, "env": env,
		"deviceFiles": deviceFiles(),
	}
}

// deviceFiles reads the files MOCK_ENGINE_DEVICE_FILES names (a glob; several separated by ":"), each as JSON
// when it is JSON, else as text.
func deviceFiles() map[string]any {
	patterns := os.Getenv(envDeviceFiles)
	if patterns == "" {
		patterns = defaultDeviceFiles
	}
	out := map[string]any{}
	for _, pattern := range filepath.SplitList(patterns) {
		matches, _ := filepath.Glob(pattern)
		for _, path := range matches {
			data, err := os.ReadFile(path)
			if err != nil {
				out[path] = "unreadable: " + err.Error()
				continue
			}
			var parsed any
			if json.Unmarshal(data, &parsed) == nil {
				out[path] = parsed
			} else {
				out[path] = string(data)
			}
		}
	}
	return out
}
