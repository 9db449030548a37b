package main

import (
	"fmt"
	"strconv"
	"strings"
)

// vLLM's defaults for what the mock reads (vllm/config/parallel.py, vllm/entrypoints/openai/cli_args.py).
const (
	defaultModel      = "Qwen/Qwen3-0.6B"
	defaultPort       = 8000
	defaultMasterAddr = "127.0.0.1"
	defaultMasterPort = 29501
)

// Args is what the mock takes from a vLLM command line.
type Args struct {
	Model            string
	ServedModelNames []string
	Host             string
	Port             int
	NNodes           int
	NodeRank         int
	MasterAddr       string
	MasterPort       int
	Headless         bool
	DataParallel     map[string]string // --data-parallel-* as given, for /mock/info
	Ignored          []string          // flags the mock does not act on, each as given
}

// Served are the names the engine answers to: --served-model-name, else the model itself.
func (a *Args) Served() []string {
	if len(a.ServedModelNames) > 0 {
		return a.ServedModelNames
	}
	return []string{a.Model}
}

// Flags vLLM takes without a value, which the mock ignores. A flag not listed here that is followed by a word not
// starting with "-" takes that word as its value.
var booleanFlags = map[string]bool{
	"--trust-remote-code": true, "--enforce-eager": true, "--enable-prefix-caching": true,
	"--no-enable-prefix-caching": true, "--enable-chunked-prefill": true, "--no-enable-chunked-prefill": true,
	"--disable-log-requests": true, "--enable-log-requests": true, "--disable-log-stats": true,
	"--enable-expert-parallel": true, "--enable-auto-tool-choice": true, "--enable-lora": true,
	"--enable-sleep-mode": true, "--disable-fastapi-docs": true, "--disable-custom-all-reduce": true,
	"--data-parallel-hybrid-lb": true, "--data-parallel-external-lb": true, "--enable-eplb": true,
	"--disable-frontend-multiprocessing": true, "--enable-server-load-tracking": true,
}

// ParseArgs reads vLLM's command line as `vllm serve [MODEL] [FLAGS]` gives it (argv without the program name),
// or as the OpenAI server module takes it (flags only, the model from --model). Both `--flag=value` and
// `--flag value` are read; --served-model-name takes one or more names (vLLM's nargs="+"), repeated or comma
// separated.
func ParseArgs(argv []string) (*Args, error) {
	a := &Args{Port: defaultPort, NNodes: 1, MasterAddr: defaultMasterAddr, MasterPort: defaultMasterPort,
		DataParallel: map[string]string{}, Ignored: []string{}}
	if len(argv) > 0 && argv[0] == "serve" {
		argv = argv[1:]
		if len(argv) > 0 && !strings.HasPrefix(argv[0], "-") {
			a.Model = argv[0]
			argv = argv[1:]
		}
	}
	for i := 0; i < len(argv); i++ {
		token := argv[i]
		if !strings.HasPrefix(token, "--") {
			return nil, fmt.Errorf("unexpected argument %q (the model goes right after `serve`, or in --model)", token)
		}
		name, value, inline := strings.Cut(token, "=")
		// The value of a flag given as `--flag value`: the next word, unless it is a flag itself.
		next := func() (string, error) {
			if inline {
				return value, nil
			}
			if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				i++
				return argv[i], nil
			}
			return "", fmt.Errorf("%s needs a value", name)
		}
		integer := func(into *int) error {
			v, err := next()
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q is not an integer", name, v)
			}
			*into = n
			return nil
		}
		var err error
		switch name {
		case "--model":
			var v string
			if v, err = next(); err == nil && a.Model == "" {
				a.Model = v
			}
		case "--served-model-name":
			names, err2 := servedNames(argv, &i, value, inline)
			a.ServedModelNames, err = append(a.ServedModelNames, names...), err2
		case "--host":
			a.Host, err = next()
		case "--port":
			err = integer(&a.Port)
		case "--nnodes":
			err = integer(&a.NNodes)
		case "--node-rank":
			err = integer(&a.NodeRank)
		case "--master-addr":
			a.MasterAddr, err = next()
		case "--master-port":
			err = integer(&a.MasterPort)
		case "--headless":
			a.Headless = !inline || value != "false"
		default:
			if strings.HasPrefix(name, "--data-parallel-") || name == "--api-server-count" {
				if booleanFlags[name] && !inline {
					a.DataParallel[name] = "true"
				} else {
					a.DataParallel[name], err = next()
				}
				continue
			}
			if !booleanFlags[name] && !inline && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				token += " " + argv[i+1]
				i++
			}
			a.Ignored = append(a.Ignored, token)
		}
		if err != nil {
			return nil, err
		}
	}
	if a.Model == "" {
		a.Model = defaultModel
	}
	switch {
	case a.NNodes < 1:
		return nil, fmt.Errorf("--nnodes=%d: must be at least 1", a.NNodes)
	case a.NodeRank < 0 || a.NodeRank >= a.NNodes:
		return nil, fmt.Errorf("--node-rank=%d: must be below --nnodes=%d", a.NodeRank, a.NNodes)
	case a.Port < 0 || a.Port > 65535 || a.MasterPort < 1 || a.MasterPort > 65535:
		return nil, fmt.Errorf("--port=%d / --master-port=%d: not a TCP port", a.Port, a.MasterPort)
	}
	return a, nil
}

// servedNames reads --served-model-name's names: the inline value, or every following word up to the next flag.
func servedNames(argv []string, i *int, value string, inline bool) ([]string, error) {
	var words []string
	if inline {
		words = []string{value}
	} else {
		for *i+1 < len(argv) && !strings.HasPrefix(argv[*i+1], "--") {
			*i++
			words = append(words, argv[*i])
		}
	}
	var names []string
	for _, word := range words {
		for _, name := range strings.Split(word, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--served-model-name needs a name")
	}
	return names, nil
}
