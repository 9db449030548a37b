#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the tests, built from pinned Go modules.
#
#   controlplane.sh build [COMPONENT...]   build (or reuse) the binaries into tests/controlplane/.bin/ (components:
#                                          etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet
#                                          kube-proxy coredns pause crossplane crank (the Crossplane CLI) registry
#                                          provider-kubernetes promtool prometheus keda-operator containerd
#                                          containerd-shim-runc-v2 ctr, egctl, check-eg-config, render-chart, epp
#                                          and ask-picker, and the test peers mock-engine and dra-driver)
#   controlplane.sh up [--nodes] [--kubelets [N]]
#                                          build, then start etcd, kube-apiserver and kube-controller-manager;
#                                          prints `export KUBECONFIG=...` lines for eval. With --nodes, also
#                                          kube-scheduler and kwok (simulated nodes and pods, no kubelet), and the
#                                          controllers that turn workloads into pods (Deployment, ReplicaSet, Job,
#                                          ResourceClaim). --kubelets N (default 1; implies --nodes) adds N real
#                                          nodes, kubelet-0..: each a containerd (2.x, CDI) with runc, a bridge
#                                          network (10.244.<i>.0/24), a kubelet and a DRA driver publishing the
#                                          devices of CONTROLPLANE_KUBELET_CLASS (an InferenceClass file; default
#                                          the seed's eks-h200-8x), plus one kube-proxy (nftables) and CoreDNS for
#                                          cluster.local (nodes.sh). Debian's runc, CNI
#                                          plugins, nftables and busybox-static are installed with apt-get where
#                                          missing. Every real node is labelled modelplane.test/kubelet=true, plus
#                                          CONTROLPLANE_KUBELET_LABELS (k=v,...), and tainted
#                                          CONTROLPLANE_KUBELET_TAINTS (k[=v]:Effect,...; default
#                                          modelplane.test/kubelet=true:NoSchedule, empty for none)
#   controlplane.sh crossplane             on a running control plane: install Crossplane's and
#                                          provider-kubernetes' CRDs, start Crossplane core, provider-kubernetes and
#                                          modelplane-function (MODELPLANE_FUNCTION_BIN) with mTLS, register the
#                                          function with Crossplane; prints more export lines.
#                                          provider-kubernetes polls each Object every CONTROLPLANE_PROVIDER_POLL
#                                          (default 10s, for the tests' speed; a fleet of thousands of Objects
#                                          needs more, docs/benchmarks.md)
#   controlplane.sh down                   stop every process `up`/`crossplane` started, by recorded PID, and
#                                          remove every container, mount, bridge and rule real nodes made
#   controlplane.sh run [--crossplane] [--nodes] [--kubelets [N]] -- CMD...
#                                          up (with nodes, real nodes, and crossplane), run CMD with the exports,
#                                          down on any exit
#
# Every component is one go.mod under modules/ (their dependency graphs would fight in one); the mains of one module
# build in one `go build`. Go's own caches (GOMODCACHE, GOCACHE) keep the sources and objects; a binary is rebuilt
# only when a file of its module directory, the build flags or the Go version change. State (certificates,
# kubeconfig, data, logs, PIDs) lives in CONTROLPLANE_STATE (default tests/controlplane/.run). Every wait is
# bounded; a component that fails to build or start stops the script with its name and the reason, after stopping
# whatever had started. CONTROLPLANE_KWOK_STAGES names another directory of kwok stage configs (default
# tests/controlplane/kwok-stages). After a run cut short, `down` stops what still runs and removes what real nodes
# left, and so does the next `up` in the same state directory once nothing of it runs. The few machine-wide things
# real nodes make (bridges, nftables tables, cgroups) carry the harness's names and are recorded in
# /run/modelplane-test-nodes: one control plane at a time runs real nodes, and the next `up --kubelets` anywhere
# removes what a cut-short one left.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin_dir="$here/.bin"
# Absolute, with no symlink: the kernel's list of mounts names real nodes' mounts under it that way.
state="$(realpath -m "${CONTROLPLANE_STATE:-$here/.run}")"
pids_file="$state/pids"
build_timeout="${CONTROLPLANE_BUILD_TIMEOUT:-2400}"
start_timeout="${CONTROLPLANE_START_TIMEOUT:-120}"

# name | module directory under modules/ | Go package of its main
components=(
    "etcd|etcd|go.etcd.io/etcd/server/v3"
    "kube-apiserver|kubernetes|k8s.io/kubernetes/cmd/kube-apiserver"
    "kube-controller-manager|kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager"
    "kube-scheduler|kubernetes|k8s.io/kubernetes/cmd/kube-scheduler"
    "kubelet|kubernetes|k8s.io/kubernetes/cmd/kubelet"
    "kube-proxy|kubernetes|k8s.io/kubernetes/cmd/kube-proxy"
    "coredns|coredns|modelplane.test/controlplane/coredns"
    "pause|pause|modelplane.test/controlplane/pause"
    "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok"
    "crossplane|crossplane|github.com/crossplane/crossplane/v2/cmd/crossplane"
    # The Crossplane CLI (`crossplane xpkg build/push`; upstream's cmd/crank) and a loopback OCI registry: the
    # install tests build and push the packages as a user does (modules/crossplane-cli/go.mod says which release).
    "crank|crossplane-cli|github.com/crossplane/crossplane/v2/cmd/crank"
    "registry|crossplane-cli|modelplane.test/controlplane/crossplane-cli/registry"
    "provider-kubernetes|provider-kubernetes|github.com/crossplane-contrib/provider-kubernetes/cmd/provider"
    "promtool|prometheus|github.com/prometheus/prometheus/cmd/promtool"
    "prometheus|prometheus|github.com/prometheus/prometheus/cmd/prometheus"
    "keda-operator|keda|github.com/kedacore/keda/v2/cmd/operator"
    # Envoy Gateway's CLI: `egctl x translate` runs its translator offline on the gateways we compose.
    "egctl|egctl|github.com/envoyproxy/gateway/cmd/egctl"
    # A strict decoder of Envoy Gateway's configuration, on egctl's own packages.
    "check-eg-config|egctl|modelplane.test/controlplane/egctl/check-eg-config"
    # Helm v4's loader and engine: renders a stack chart with the values a composed Release sets.
    "render-chart|helm|modelplane.test/controlplane/helm/render-chart"
    # The inference extension's endpoint picker, and a client asking it over Envoy's ext-proc protocol what it picks.
    "epp|epp|sigs.k8s.io/gateway-api-inference-extension/cmd/epp"
    "ask-picker|epp|modelplane.test/controlplane/epp/ask-picker"
    # Test peers of our own (each module's README.md): a vLLM stand-in for the images pods run, and a DRA driver.
    "mock-engine|mock-engine|modelplane.test/controlplane/mock-engine"
    "dra-driver|dra-driver|modelplane.test/controlplane/dra-driver"
    # The real nodes' runtime: containerd 2.x reads the CDI devices a DRA driver prepares (Debian's 1.6 drops them).
    "containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd"
    "containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
    "ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr"
)
# The environment of one module's `go build`, where it needs one: the mock engine runs in images with no C
# library, so it is linked statically. Every other module builds with Go's defaults, which keeps their stamps
# and binaries as they were (and the DRA driver, which runs on the host, compiles Kubernetes' packages as
# kube-apiserver's build does, so Go's cache serves both).
module_env=(
    "mock-engine|CGO_ENABLED=0"
    # egctl pulls in podman's storage drivers, whose btrfs one needs C headers this machine lacks; egctl uses no C.
    "egctl|CGO_ENABLED=0"
)
# No DWARF or symbol table (-s -w): linking these binaries is a large part of a cold build, and the tests never
# debug them. -trimpath keeps machine paths out of the binaries.
build_flags=(-trimpath "-ldflags=-s -w")

# The flags of one module's build, into module_flags. Kubernetes' and Crossplane's binaries read their version from
# variables their release builds set with -X (else a kubelet's Node reports v0.0.0-master); the release is the one
# go.mod pins. Only that module gets them: other modules link the same package at other versions.
module_build_flags() { # MODULE
    local version
    module_flags=("${build_flags[@]}")
    # containerd's btrfs snapshotter needs the btrfs headers; the nodes use overlayfs.
    if [[ "$1" == containerd ]]; then module_flags+=(-tags no_btrfs); fi
    # Crossplane checks each package's `spec.crossplane.version` against its own, which its release build stamps;
    # unstamped, it refuses every package that names a range ("invalid semantic version").
    if [[ "$1" == crossplane ]]; then
        version="$(awk '$1 == "github.com/crossplane/crossplane/v2" && $2 ~ /^v/ { print $2; exit }' \
            "$here/modules/crossplane/go.mod")"
        [[ -n "$version" ]] || die "no github.com/crossplane/crossplane/v2 release in modules/crossplane/go.mod"
        module_flags=(-trimpath "-ldflags=-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=\
$version")
    fi
    [[ "$1" == kubernetes ]] || return 0
    local pkg=k8s.io/component-base/version
    version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$here/modules/kubernetes/go.mod")"
    [[ "$version" =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "no k8s.io/kubernetes release in modules/kubernetes/go.mod"
    module_flags=(-trimpath "-ldflags=-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=${BASH_REMATCH[1]} -X \
$pkg.gitMinor=${BASH_REMATCH[2]}")
}

# shellcheck source=nodes.sh
source "$here/nodes.sh"

log() { printf 'controlplane: %s\n' "$*" >&2; }
die() {
    printf 'controlplane: FAILED: %s\n' "$*" >&2
    exit 1
}

# --- build -----------------------------------------------------------------------------------------------------

component_field() { # NAME FIELD(2|3)
    local entry
    for entry in "${components[@]}"; do
        if [[ "${entry%%|*}" == "$1" ]]; then
            cut -d'|' -f"$2" <<<"$entry"
            return
        fi
    done
    die "unknown component '$1' (known: $(printf '%s ' "${components[@]%%|*}"))"
}

# The `go build` environment of MODULE (a directory under modules/): its module_env entry, or nothing.
module_environment() { # MODULE
    local entry
    for entry in "${module_env[@]}"; do
        if [[ "${entry%%|*}" == "$1" ]]; then echo "${entry#*|}"; fi
    done
}

# What the binary of NAME is built from: Go's version, the environment and flags, the package, and every file of its
# module directory (go.mod, go.sum, any local stand-in module, a peer's own sources).
wanted_stamp() { # NAME
    local module package env module_flags
    module="$(component_field "$1" 2)"
    package="$(component_field "$1" 3)"
    env="$(module_environment "$module")"
    module_build_flags "$module"
    (go version && echo "${env:+$env }${module_flags[*]} $package" &&
        find "$here/modules/$module" -type f -print0 | sort -z | xargs -0 cat) |
        sha256sum | cut -d' ' -f1
}

# The file `go build -o DIR/` writes for PACKAGE: its last path element, a major-version suffix (/v3) skipped.
go_binary_name() { # PACKAGE
    local package="$1"
    if [[ "${package##*/}" =~ ^v[0-9]+$ ]]; then package="${package%/*}"; fi
    echo "${package##*/}"
}

# Builds the stale ones of NAMES, all of one module, in one `go build`: the packages they share are loaded and
# compiled once, and their links run in parallel.
build_module() { # MODULE NAME...
    local module="$here/modules/$1" name stale=() packages=() started out module_flags
    shift
    for name in "$@"; do
        if [[ ! -x "$bin_dir/$name" ||
            "$(cat "$bin_dir/$name.stamp" 2>/dev/null || true)" != "$(wanted_stamp "$name")" ]]; then
            stale+=("$name")
            packages+=("$(component_field "$name" 3)")
        fi
    done
    ((${#stale[@]})) || return 0
    mkdir -p "$bin_dir"
    out="$bin_dir/.building-${module##*/}"
    rm -rf "$out"
    mkdir -p "$out"
    log "building ${stale[*]} (module ${module#"$repo"/}; cold builds take minutes)"
    started=$SECONDS
    for name in "${stale[@]}"; do rm -f "$bin_dir/$name.stamp"; done
    local env=()
    read -ra env <<<"$(module_environment "${module##*/}")"
    module_build_flags "${module##*/}"
    if ! (cd "$module" && env "${env[@]}" timeout --kill-after=10 "$build_timeout" go build "${module_flags[@]}" \
        -o "$out/" "${packages[@]}") >"$bin_dir/${module##*/}.build.log" 2>&1; then
        tail -n 20 "$bin_dir/${module##*/}.build.log" >&2
        die "${stale[*]} did not build within ${build_timeout}s (log: ${bin_dir#"$repo"/}/${module##*/}.build.log)"
    fi
    for name in "${stale[@]}"; do
        mv "$out/$(go_binary_name "$(component_field "$name" 3)")" "$bin_dir/$name"
        wanted_stamp "$name" >"$bin_dir/$name.stamp"
    done
    rm -rf "$out"
    log "built ${stale[*]} in $((SECONDS - started))s"
}

cmd_build() {
    command -v go >/dev/null || die "go is not on PATH (Go 1.26 or later is needed, https://go.dev/dl/)"
    local name module modules=()
    if (($# == 0)); then
        set -- "${components[@]%%|*}"
    fi
    for name in "$@"; do
        module="$(component_field "$name" 2)"
        [[ " ${modules[*]} " == *" $module "* ]] || modules+=("$module")
    done
    for module in "${modules[@]}"; do
        local names=()
        for name in "$@"; do
            if [[ "$(component_field "$name" 2)" == "$module" ]]; then names+=("$name"); fi
        done
        build_module "$module" "${names[@]}"
    done
}

# --- processes -------------------------------------------------------------------------------------------------

# A loopback port nothing listens on, never one handed out before on this machine: the kernel may offer the same
# ephemeral port to two binds in a row once the first is closed (etcd then found its peer port taken by its own
# client port), and a process the fault tests kill gives its port back until it is started again on it, when a
# second control plane on the machine could take it. Every port handed out is recorded, under a lock, in one file
# per machine (its newest 2,000 to 5,000 entries) that the tests' python/ports.py keeps too.
ports_registry="${MODELPLANE_PORTS_FILE:-/tmp/modelplane-controlplane.ports}"
free_port() {
    local port lock
    exec {lock}>>"$ports_registry"
    flock "$lock"
    while :; do
        port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        grep -qx "$port" "$ports_registry" 2>/dev/null || break
    done
    echo "$port" >>"$ports_registry"
    # Bounded: the newest entries cover every control plane still running here.
    if (($(wc -l <"$ports_registry") > 5000)); then
        local newest
        newest="$(tail -n 2000 "$ports_registry")"
        printf '%s\n' "$newest" >"$ports_registry"
    fi
    exec {lock}>&-
    echo "$port"
}

# Starts NAME as a recorded background process; its output goes to $state/NAME.log.
start() { # NAME BINARY ARGS...
    local name="$1"
    shift
    "$@" >"$state/$name.log" 2>&1 &
    echo "$name $! $1" >>"$pids_file"
}

pid_of() { awk -v n="$1" '$1 == n { print $2 }' "$pids_file"; }

# Polls CHECK until it succeeds; fails naming NAME if its process exits or START_TIMEOUT passes.
wait_ready() { # NAME CHECK...
    local name="$1" pid deadline=$((SECONDS + start_timeout))
    shift
    pid="$(pid_of "$name")"
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$state/$name.log" >&2
            die "$name exited while starting (log: $state/$name.log)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$state/$name.log" >&2
            die "$name was not ready within ${start_timeout}s (log: $state/$name.log)"
        fi
        sleep 0.5
    done
    log "$name is ready (pid $pid)"
}

# Stops every process `up` and `crossplane` started, then removes what real nodes made (their containers, mounts
# and network go last, once no kubelet or containerd can make more).
cmd_down() {
    nodes_drivers_down
    stop_recorded
    if [[ -f "$state/kubelets" ]]; then
        nodes_clean "$state" || die "real nodes: some of what they made could not be removed (see above)"
    fi
}

# Stops every recorded process, last started first (kube-apiserver drains faster with etcd still up): TERM, then
# KILL after a bounded wait. A PID is only signalled while it still runs the binary it was recorded with, so a
# reused PID is never hit.
still_running() { # PID
    kill -0 "$1" 2>/dev/null && [[ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]]
}

stop_recorded() { # [PIDS_FILE]
    local pids="${1:-$pids_file}"
    [[ -f "$pids" ]] || return 0
    local name pid binary stopped=0 deadline
    while read -r name pid binary; do
        if runs_binary "$pid" "$binary"; then
            kill -TERM "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 10))
            while still_running "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
            if still_running "$pid"; then
                log "$name (pid $pid) ignored TERM for 10s: killing it"
                kill -KILL "$pid" 2>/dev/null || true
            fi
            # Reap it if it is our child; a process from an earlier shell has init as its parent, which reaps it
            # in its own time (seconds, here): once a zombie, it is done.
            wait "$pid" 2>/dev/null || true
            while still_running "$pid"; do sleep 0.1; done
            stopped=$((stopped + 1))
        fi
    done < <(tac "$pids")
    rm -f "$pids"
    ((stopped == 0)) || log "stopped $stopped processes"
}

# --- certificates ----------------------------------------------------------------------------------------------

sign() { # NAME SUBJECT EXTENSIONS
    local pki="$state/pki"
    openssl req -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -subj "$2" -out "$pki/$1.csr" 2>/dev/null
    printf '%s\n' "$3" >"$pki/$1.ext"
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 7 \
        -extfile "$pki/$1.ext" -out "$pki/$1.crt" 2>/dev/null
}

make_pki() {
    local pki="$state/pki"
    mkdir -p "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 7 \
        -subj "/CN=modelplane-test-ca" 2>/dev/null || die "openssl could not create the test CA"
    sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:10.0.0.1" \
        "extendedKeyUsage=serverAuth")"
    sign admin "/O=system:masters/CN=modelplane-test-admin" "extendedKeyUsage=clientAuth"
    # How kube-apiserver reaches a kubelet (logs, exec, port-forward); the kubelet's own certificate is checked.
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
    openssl genrsa -out "$pki/service-account.key" 2048 2>/dev/null
    openssl rsa -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub" 2>/dev/null
}

write_kubeconfig() { # PORT
    local pki="$state/pki"
    cat >"$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$1
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
EOF
}

api_ready() { # PORT PATH
    local pki="$state/pki"
    [[ "$(curl -sS --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
        "https://127.0.0.1:$1$2")" == ok ]]
}

etcd_ready() { [[ "$(curl -sS --max-time 5 "http://127.0.0.1:$1/health")" == *'"health":"true"'* ]]; }

exports() {
    cat "$state/env"
}

# The annotation a Node carries for kwok to run it: only those nodes are simulated, so a test can still create a
# Node nobody runs (it stays NotReady, as a lost node would).
kwok_node_annotation="kwok.x-k8s.io/node=fake"

cmd_up() {
    command -v openssl >/dev/null || die "openssl is not on PATH (Debian: apt-get install openssl)"
    command -v curl >/dev/null || die "curl is not on PATH (Debian: apt-get install curl)"
    local nodes=false kubelets=0 kubelets_export=""
    while (($#)); do
        case "$1" in
        --nodes) nodes=true ;;
        --kubelets=*) kubelets="${1#--kubelets=}" ;;
        --kubelets)
            kubelets=1
            if [[ "${2:-}" =~ ^[0-9]+$ ]]; then kubelets="$2" && shift; fi
            ;;
        *) die "up: unknown argument '$1' (usage: up [--nodes] [--kubelets [N]])" ;;
        esac
        shift
    done
    [[ "$kubelets" =~ ^[0-9]+$ ]] && ((kubelets <= nodes_max)) ||
        die "up: --kubelets takes a number of real nodes from 1 to $nodes_max, not '$kubelets'"
    # Real nodes need what simulated ones do: the scheduler and the workload controllers.
    ((kubelets == 0)) || nodes=true
    if ((kubelets)); then
        cmd_build etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet kube-proxy coredns pause \
            containerd containerd-shim-runc-v2 ctr dra-driver mock-engine
    elif $nodes; then
        cmd_build etcd kube-apiserver kube-controller-manager kube-scheduler kwok
    else
        cmd_build etcd kube-apiserver kube-controller-manager
    fi
    if recorded_alive "$pids_file"; then
        # What `run` started outlives a `run` that was killed; a control plane `up` left running is someone's.
        run_owner_gone "$state" || die "a control plane from $state is still running: run '$0 down' first"
        log "stopping what a cut-short run left in $state"
        stop_recorded
    fi
    # A run cut short (its processes killed) leaves containers, mounts and a network behind: gone before anything
    # under the state directory is removed.
    nodes_clean_leftovers "$( ((kubelets)) && echo true || echo false)"
    rm -rf "$state"
    mkdir -p "$state"
    : >"$pids_file"
    if [[ -n "${run_owner:-}" ]]; then echo "$run_owner" >"$state/run-owner"; fi
    # Whatever fails from here on leaves nothing running.
    trap 'status=$?; if ((status != 0)); then cmd_down; fi' EXIT
    make_pki
    local pki="$state/pki" etcd_port peer_port api_port
    etcd_port="$(free_port)"
    peer_port="$(free_port)"
    api_port="$(free_port)"
    api_server="https://127.0.0.1:$api_port"

    start etcd "$bin_dir/etcd" --name test --data-dir "$state/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "test=http://127.0.0.1:$peer_port" --listen-metrics-urls "" \
        --unsafe-no-fsync --log-level warn
    wait_ready etcd etcd_ready "$etcd_port"

    # Pods reach the API server as in any cluster, through the `kubernetes` Service, whose endpoint must not be a
    # loopback address: with real nodes it listens on every address and advertises the first node's bridge, and
    # the nodes' table (nodes.sh) drops its port on every interface but loopback and the bridges.
    local api_bind=127.0.0.1 api_advertise=127.0.0.1
    if ((kubelets)); then api_bind=0.0.0.0 api_advertise="$cluster_dns"; fi
    start kube-apiserver "$bin_dir/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address "$api_bind" --advertise-address "$api_advertise" --secure-port "$api_port" \
        --cert-dir "$state/apiserver-certs" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$pki/service-account.pub" \
        --service-account-signing-key-file "$pki/service-account.key" \
        --service-cluster-ip-range 10.0.0.0/24 --profiling=false \
        --allow-privileged=true \
        --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP
    write_kubeconfig "$api_port"
    wait_ready kube-apiserver api_ready "$api_port" /readyz

    local kcm_controllers=garbage-collector-controller,namespace-controller
    kcm_controllers+=,serviceaccount-controller,serviceaccount-token-controller
    # With nodes, pods exist: workloads make them (Deployments through ReplicaSets, Jobs), a pod's
    # ResourceClaimTemplates become its ResourceClaims, claims of volumes bind to volumes (and are released only once
    # no pod uses them), and Endpoints follow the Ready pods behind a Service. The
    # node lifecycle controller lifts the not-ready taint admission puts on every new Node once kwok reports it
    # Ready (and would mark it NotReady again were kwok's heartbeat to stop).
    if $nodes; then
        kcm_controllers+=,deployment-controller,replicaset-controller,job-controller,resourceclaim-controller
        kcm_controllers+=,endpointslice-controller,endpoints-controller,ttl-after-finished-controller
        kcm_controllers+=,node-lifecycle-controller,persistentvolume-binder-controller
        kcm_controllers+=,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller
    fi
    # A real pod mounts its service account's token with the cluster's CA, from the kube-root-ca.crt ConfigMap
    # this controller publishes in every namespace. Pods that run as a chart installs them (Crossplane's, in
    # test_install.py) hold the rules their ClusterRoles aggregate, which this controller fills in.
    if ((kubelets)); then
        kcm_controllers+=,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller
    fi
    # The controller manager brings garbage collection (owner references), namespace deletion and service accounts.
    start kube-controller-manager "$bin_dir/kube-controller-manager" \
        --kubeconfig "$state/kubeconfig" --authentication-kubeconfig "$state/kubeconfig" \
        --authorization-kubeconfig "$state/kubeconfig" --leader-elect=false --secure-port 0 \
        --controllers "$kcm_controllers" \
        --service-account-private-key-file "$pki/service-account.key" --root-ca-file "$pki/ca.crt" \
        --use-service-account-credentials=false --profiling=false
    wait_ready kube-controller-manager kcm_ready

    if $nodes; then
        local scheduler_port kwok_port
        scheduler_port="$(free_port)"
        # The scheduler's default profile, so DynamicResources (GA in this release) allocates ResourceClaims
        # against the ResourceSlices published for the simulated nodes.
        start kube-scheduler "$bin_dir/kube-scheduler" \
            --kubeconfig "$state/kubeconfig" --authentication-kubeconfig "$state/kubeconfig" \
            --authorization-kubeconfig "$state/kubeconfig" --leader-elect=false \
            --bind-address 127.0.0.1 --secure-port "$scheduler_port" --cert-dir "$state/scheduler-certs" \
            --profiling=false
        wait_ready kube-scheduler https_ok "$scheduler_port" /readyz
        kwok_port="$(free_port)"
        local stage stages=()
        for stage in "${CONTROLPLANE_KWOK_STAGES:-$here/kwok-stages}"/*.yaml; do stages+=(--config "$stage"); done
        # kwok's own "fast" stages (kwok-stages/SOURCES.md); no config of the user's home is read. It renews each
        # node's Lease, as a kubelet does: the node lifecycle controller marks a node without one NotReady (and its
        # pods unready) after its grace period.
        start kwok "$bin_dir/kwok" --kubeconfig "$state/kubeconfig" "${stages[@]}" \
            --manage-nodes-with-annotation-selector "$kwok_node_annotation" \
            --server-address "127.0.0.1:$kwok_port" --cidr 10.1.0.0/16 --node-ip 127.0.0.1 \
            --node-lease-duration-seconds 40
        wait_ready kwok http_ok "$kwok_port" /healthz
    fi
    if ((kubelets)); then nodes_up "$kubelets"; fi

    cat >"$state/env" <<EOF
export KUBECONFIG=$state/kubeconfig
export CONTROLPLANE_STATE=$state
export CONTROLPLANE_PIDS=$pids_file
export CONTROLPLANE_BIN=$bin_dir
export CONTROLPLANE_API=https://127.0.0.1:$api_port
export CONTROLPLANE_NODES=$nodes
export CONTROLPLANE_KUBELETS=$kubelets_export
EOF
    if ((kubelets)); then echo "export CONTROLPLANE_CLUSTER_DNS=$cluster_dns" >>"$state/env"; fi
    trap - EXIT
    exports
}

# One REST call to the running API server as the admin; prints the answer, fails (saying so) on an HTTP error. No
# kubectl: the few calls the harness makes are plain REST, and kubectl would be one more large Go build.
api() { # METHOD PATH [CURL ARGUMENTS...]
    local method="$1" path="$2" pki="$state/pki" server="${api_server:-}"
    shift 2
    [[ -n "$server" ]] || server="$(sed -n 's/^export CONTROLPLANE_API=//p' "$state/env")"
    curl -sS --fail-with-body --max-time 30 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
        -X "$method" "$server$path" "$@"
}

# Creates the object of one single-document YAML file (- for stdin) at PATH; the API server reads YAML bodies.
create_yaml() { # PATH FILE
    api POST "$1" -H 'Content-Type: application/yaml' --data-binary "@$2" >/dev/null
}

crds_path=/apis/apiextensions.k8s.io/v1/customresourcedefinitions

# True once every CRD is Established.
crds_established() {
    api GET "$crds_path" | python3 -c '
import json, sys
def established(crd):
    conditions = (crd.get("status") or {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
sys.exit(not all(established(crd) for crd in json.load(sys.stdin)["items"]))'
}

# The garbage collector has synced its informers once it logs so; until then owner-reference cleanup can lag.
kcm_ready() { grep -qi 'all resource monitors have synced' "$state/kube-controller-manager.log"; }

# Where the upstream CRDs live: MODELPLANE_CRDS_DIR, else the repository's vendored tests/crds.
# tests/controlplane/python/kube.py resolves the same way.
crds_dir() {
    local dir
    for dir in "${MODELPLANE_CRDS_DIR:-}" "$repo/tests/crds"; do
        if [[ -n "$dir" && -d "$dir/crossplane" ]]; then
            (cd "$dir" && pwd)
            return
        fi
    done
    die "no upstream CRDs: set MODELPLANE_CRDS_DIR or vendor them into tests/crds"
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

http_ok() { curl -fsS --max-time 5 "http://127.0.0.1:$1$2" >/dev/null; }

# A component's own serving certificate is self-signed, so its health endpoint is checked without verification.
https_ok() { curl -kfsS --max-time 5 "https://127.0.0.1:$1$2" >/dev/null; }

# Crossplane, provider-kubernetes and our function on the running control plane. Crossplane runs its packages
# with the External runtime: it never starts a Deployment, and reaches the function at the endpoint the
# FunctionRevision below records, over mTLS with certificates from the test CA.
cmd_crossplane() {
    [[ -f "$state/env" && -f "$pids_file" ]] || die "crossplane: no running control plane in $state (run '$0 up')"
    local function_bin="${MODELPLANE_FUNCTION_BIN:-}"
    [[ -x "$function_bin" ]] || die "crossplane: MODELPLANE_FUNCTION_BIN must name the built modelplane-function binary"
    cmd_build crossplane provider-kubernetes
    trap 'status=$?; if ((status != 0)); then cmd_down; fi' EXIT
    local crds pki="$state/pki" dir
    crds="$(crds_dir)"
    local pk_webhook ca_bundle crd
    pk_webhook="$(free_port)"
    ca_bundle="$(base64 -w0 <"$pki/ca.crt")"
    for crd in "$crds"/crossplane/*.yaml; do
        create_yaml "$crds_path" "$crd" || die "crossplane: the Crossplane CRD ${crd##*/} did not apply"
    done
    for crd in "$crds"/provider-kubernetes/*.yaml; do
        # Crossplane's package manager points a provider CRD's conversion webhook at the provider's Service
        # (the vendored file names only its path); here the provider listens on loopback.
        if grep -q 'strategy: Webhook' "$crd"; then
            local client_config="      clientConfig:\\n        url: https://127.0.0.1:$pk_webhook/convert"
            client_config+="\\n        caBundle: $ca_bundle"
            sed -e '/^      clientConfig:$/,/^          path: \/convert$/c\' -e "$client_config" "$crd" |
                create_yaml "$crds_path" -
        else
            create_yaml "$crds_path" "$crd"
        fi || die "crossplane: the provider-kubernetes CRD ${crd##*/} did not apply"
    done
    local deadline=$((SECONDS + start_timeout))
    until crds_established; do
        ((SECONDS < deadline)) || die "crossplane: CRDs were not established within ${start_timeout}s"
        sleep 0.5
    done
    api POST /api/v1/namespaces -H 'Content-Type: application/json' -d '{"metadata":{"name":"crossplane-system"}}' \
        >/dev/null || die "crossplane: could not create crossplane-system"

    for dir in crossplane-client function-server provider-kubernetes-webhook; do
        mkdir -p "$pki/$dir"
        cp "$pki/ca.crt" "$pki/$dir/ca.crt"
    done
    sign crossplane-client/tls "/CN=crossplane" "extendedKeyUsage=clientAuth"
    sign function-server/tls "/CN=modelplane-function" \
        "$(printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "extendedKeyUsage=serverAuth")"
    sign provider-kubernetes-webhook/tls "/CN=provider-kubernetes" \
        "$(printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "extendedKeyUsage=serverAuth")"

    local function_port xp_health xp_metrics pk_health pk_metrics
    function_port="$(free_port)"
    start modelplane-function "$function_bin" serve --address "127.0.0.1:$function_port" \
        --tls-certs-dir "$pki/function-server"
    wait_ready modelplane-function tcp_open "$function_port"

    xp_health="$(free_port)"
    xp_metrics="$(free_port)"
    # Assignments before a function call reach the process it starts; `env` would hide the binary's PID.
    KUBECONFIG="$state/kubeconfig" TLS_CLIENT_CERTS_DIR="$pki/crossplane-client" \
        start crossplane "$bin_dir/crossplane" core start --enable-webhooks=false --package-runtime External \
        --namespace crossplane-system --xpkg-cache-dir "$state/xpkg-cache" \
        --health-probe-port "$xp_health" --metrics-port "$xp_metrics" --poll-interval 10s --sync-interval 30s
    wait_ready crossplane http_ok "$xp_health" /readyz

    pk_health="$(free_port)"
    pk_metrics="$(free_port)"
    KUBECONFIG="$state/kubeconfig" TLS_SERVER_CERTS_DIR="$pki/provider-kubernetes-webhook" \
        start provider-kubernetes "$bin_dir/provider-kubernetes" --poll "${CONTROLPLANE_PROVIDER_POLL:-10s}" --sync 30s --webhook-port "$pk_webhook" \
        --sanitize-secrets \
        --metrics-bind-address "127.0.0.1:$pk_metrics" --health-probe-bind-addr "127.0.0.1:$pk_health"
    wait_ready provider-kubernetes http_ok "$pk_health" /readyz

    # The Compositions call the function by its package name; Crossplane dials the active revision's endpoint.
    create_yaml /apis/pkg.crossplane.io/v1/functionrevisions - <<EOF ||
apiVersion: pkg.crossplane.io/v1
kind: FunctionRevision
metadata:
  name: modelplaneai-function-modelplane-test
  labels:
    pkg.crossplane.io/package: modelplaneai-function-modelplane
spec:
  desiredState: Active
  image: modelplane.test/function-modelplane:local
  revision: 1
EOF
        die "crossplane: the FunctionRevision did not apply"
    api PATCH /apis/pkg.crossplane.io/v1/functionrevisions/modelplaneai-function-modelplane-test/status \
        -H 'Content-Type: application/merge-patch+json' \
        -d "{\"status\":{\"endpoint\":\"127.0.0.1:$function_port\",\"capabilities\":[\"composition\"]}}" >/dev/null ||
        die "crossplane: could not record the function's endpoint in the FunctionRevision status"
    echo "export MODELPLANE_FUNCTION_ADDRESS=127.0.0.1:$function_port" >>"$state/env"
    trap - EXIT
    exports
}

cmd_run() {
    local with_crossplane=false up_args=()
    while (($#)); do
        case "$1" in
        --crossplane) with_crossplane=true ;;
        --nodes) up_args+=(--nodes) ;;
        --kubelets=*) up_args+=("$1") ;;
        --kubelets)
            up_args+=(--kubelets)
            if [[ "${2:-}" =~ ^[0-9]+$ ]]; then up_args+=("$2") && shift; fi
            ;;
        --) shift; break ;;
        *) die "run: unknown argument '$1' (usage: run [--crossplane] [--nodes] [--kubelets [N]] -- CMD...)" ;;
        esac
        shift
    done
    (($#)) || die "run: no command given (usage: run [--crossplane] [--nodes] [--kubelets [N]] -- CMD...)"
    trap 'cmd_down' EXIT
    trap 'exit 130' INT TERM
    # Recorded by `up`: were this script killed (no trap runs), the next `up` knows its processes for leftovers.
    run_owner="$$ $(process_start "$$")"
    # Not `eval "$(cmd_up)"`: that would hide a failed start behind eval's own success.
    local exported
    exported="$(cmd_up "${up_args[@]}")" || exit 1
    eval "$exported"
    if $with_crossplane; then
        exported="$(cmd_crossplane)" || exit 1
        eval "$exported"
    fi
    "$@"
}

case "${1:-}" in
build) shift; cmd_build "$@" ;;
up) shift; cmd_up "$@" ;;
crossplane) cmd_crossplane ;;
down) cmd_down ;;
run) shift; cmd_run "$@" ;;
*) die "usage: $0 build [COMPONENT...] | up [--nodes] | crossplane | down | run [--crossplane] [--nodes] -- CMD..." ;;
esac
