# Real nodes for the test control plane: sourced by controlplane.sh (`up --kubelets N`), whose helpers (start,
# wait_ready, free_port, sign, api, log, die) and variables (state, here, bin_dir, pids_file) it uses.
#
# Node i (0-based) is `kubelet-<i>`: its own containerd (2.x built here, CDI on, with Debian's runc; a kubelet
# garbage-collects the sandboxes it does not know, so two never share one), a DRA driver, a bridge `mpbr<i>` at 10.244.<i>.1/24 (the node's IP, its
# pods' gateway) with a bridge CNI network on 10.244.<i>.0/24, and a kubelet whose pods live in a cgroup tree of
# their own. One kube-proxy (nftables) serves the Services of all nodes, since they share this machine's network
# stack; CoreDNS, a host process on 10.244.0.1:53, answers for cluster.local from the API server and is every pod's
# nameserver. Everything the nodes make lives under the state directory, except what the kernel or containerd keep
# machine-wide; those carry the harness's names and are recorded in $nodes_lock, so that `down`, or the next `up`
# after a run that was cut short, removes exactly them:
#   bridges mpbr<i>; nftables tables `inet modelplane_test_nodes` (ours: forwarding only between the suite's
#   bridges, so nothing is routed off the machine) and `ip`/`ip6 kube-proxy`; cgroups /modelplane-test-nodes/ in
#   every hierarchy; containerd's shim sockets under /run/containerd/s and CNI results under /var/lib/cni/results
#   (named by the nodes' own sandboxes); the kubelet's links in /var/log/containers; and the sysctls the kubelet and
#   the bridge set (saved before, restored after).
# Only one control plane on a machine runs real nodes at a time (kube-proxy's table has a fixed name).

nodes_lock=/run/modelplane-test-nodes
nodes_table=modelplane_test_nodes
nodes_cgroup=modelplane-test-nodes
nodes_network=modelplane-kubelet
nodes_max=8
cni_bin=/usr/lib/cni
pause_image=modelplane.test/pause:local
cluster_dns=10.244.0.1
# The kubelet raises these (and the bridge plugin ip_forward); `down` puts back what the machine had.
nodes_sysctls=(net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet)
# Machine-wide directories containerd and the kubelet create; removed at the end only if a node made them.
nodes_host_dirs=(/run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni /var/log/containers)

node_name() { echo "kubelet-$1"; }

# --- packages --------------------------------------------------------------------------------------------------

nodes_install() {
    local missing=() tool package
    for tool in runc:runc nft:nftables; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
    done
    [[ -x "$cni_bin/bridge" && -x "$cni_bin/host-local" && -x "$cni_bin/loopback" ]] ||
        missing+=(containernetworking-plugins)
    [[ -x /bin/busybox ]] && /bin/busybox --list >/dev/null 2>&1 && ! ldd /bin/busybox >/dev/null 2>&1 ||
        missing+=(busybox-static)
    ((${#missing[@]})) || return 0
    command -v apt-get >/dev/null || die "real nodes need ${missing[*]} (Debian packages; no apt-get here)"
    ((EUID == 0)) || die "real nodes need ${missing[*]}: install them (apt-get), or run as root"
    readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    log "installing ${missing[*]} (apt-get; log: $state/apt.log)"
    for package in update "install -y -q --no-install-recommends ${missing[*]}"; do
        # shellcheck disable=SC2086 # the words of the apt-get command
        DEBIAN_FRONTEND=noninteractive timeout --kill-after=10 600 apt-get $package >>"$state/apt.log" 2>&1 ||
            die "apt-get $package failed (log: $state/apt.log)"
    done
}

# --- leftovers -------------------------------------------------------------------------------------------------

# True while PID runs BINARY (a recorded PID may since have been reused).
runs_binary() { # PID BINARY
    [[ -r "/proc/$1/cmdline" && "$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" | head -n 1)" == "$2" ]]
}

# When PID started, in clock ticks since boot: with the PID, names one process for good.
process_start() { # PID
    sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# True if the control plane in STATE was started by `run` and that `run` is gone (killed: its trap never ran).
run_owner_gone() { # STATE
    local pid started
    [[ -f "$1/run-owner" ]] || return 1
    read -r pid started <"$1/run-owner"
    [[ "$(process_start "$pid")" != "$started" ]]
}

# True while a process recorded in PIDS_FILE still runs its recorded binary.
recorded_alive() { # PIDS_FILE
    local name pid binary
    [[ -f "$1" ]] || return 1
    while read -r name pid binary; do
        if runs_binary "$pid" "$binary"; then return 0; fi
    done <"$1"
    return 1
}

# PIDs whose command line mentions TEXT (a containerd shim names its containerd's socket with -address).
pids_mentioning() { # TEXT
    local proc
    for proc in /proc/[0-9]*; do
        [[ "${proc#/proc/}" != "$$" ]] || continue
        # (A process may end between the glob and the read.)
        if tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -qF -- "$1"; then echo "${proc#/proc/}"; fi
    done
}

# Every process of the nodes' cgroups (the containers and their pause processes), killed until none is left.
kill_node_cgroups() {
    local round roots procs pids
    for round in $(seq 1 50); do
        readarray -t roots < <(compgen -G "/sys/fs/cgroup/*/$nodes_cgroup" || true)
        ((${#roots[@]})) || return 0
        readarray -t procs < <(find "${roots[@]}" -name cgroup.procs 2>/dev/null)
        ((${#procs[@]})) || return 0
        pids="$(cat "${procs[@]}" 2>/dev/null | sort -u)"
        [[ -n "$pids" ]] || return 0
        # shellcheck disable=SC2086 # one PID a word
        kill -KILL $pids 2>/dev/null || true
        sleep 0.2
    done
    log "processes of the real nodes' cgroups ($nodes_cgroup) survived SIGKILL: $pids"
    return 1
}

# Mount points at or under DIR, deepest first (each as often as it is mounted).
mounts_under() { # DIR
    awk -v dir="$1" '$5 == dir || index($5, dir "/") == 1 { print length($5), $5 }' /proc/self/mountinfo |
        sort -rn | cut -d' ' -f2-
}

unmount_under() { # DIR
    local round mount
    for round in $(seq 1 20); do
        [[ -n "$(mounts_under "$1")" ]] || return 0
        while read -r mount; do
            umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || true
        done < <(mounts_under "$1")
    done
    log "mounts under $1 could not be unmounted: $(mounts_under "$1" | tr '\n' ' ')"
    return 1
}

# True unless the lock names another control plane whose processes still run: only then are the machine-wide
# things of the real nodes someone else's.
nodes_machine_ours() { # DIR
    local owner
    [[ -f "$nodes_lock/owner" ]] || return 0
    owner="$(cat "$nodes_lock/owner")"
    [[ "$owner" == "$1" ]] || ! recorded_alive "$owner/pids" || run_owner_gone "$owner"
}

# Removes whatever the real nodes of the control plane in DIR left: after `down` stopped its processes, or after a
# run that was cut short (then the containers, shims and mounts are still there). Touches only what lies under DIR
# or carries the harness's names (and those only while no other control plane's nodes run); never fails for
# something already gone. Fails, saying what, if something could not be removed.
nodes_clean() { # DIR
    local dir="$1" node sock pid task file name value ok=0
    shopt -s nullglob
    if nodes_machine_ours "$dir"; then kill_node_cgroups || ok=1; fi
    for node in "$dir"/kubelet-*/; do
        # The socket itself is gone once its containerd stopped.
        sock="${node%/}/containerd.sock"
        # A shim outlives its containerd (and so do its containers, killed above).
        for pid in $(pids_mentioning "-address $sock"); do kill -KILL "$pid" 2>/dev/null || true; done
        # containerd 1.6 names a shim's socket by the hash of its containerd's address, namespace and task id.
        for task in "${node}"containerd/state/io.containerd.runtime.v2.task/k8s.io/*; do
            rm -f "/run/containerd/s/$(printf '%s' "$sock/k8s.io/${task##*/}" | sha256sum | cut -d' ' -f1)"
        done
        # The CNI results of a sandbox never torn down: its pod network's (named ours) and containerd's loopback.
        for task in "${node}"containerd/root/io.containerd.grpc.v1.cri/sandboxes/*; do
            rm -f "/var/lib/cni/results/cni-loopback-${task##*/}-lo"
        done
    done
    unmount_under "$dir" || ok=1
    for file in /var/log/containers/*; do
        [[ "$(readlink "$file")" != "$dir/"* ]] || rm -f "$file"
    done
    if nodes_machine_ours "$dir"; then
        for file in /sys/fs/cgroup/*/"$nodes_cgroup"; do
            find "$file" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
        for file in /sys/class/net/mpbr*; do ip link delete "${file##*/}" 2>/dev/null || true; done
        nft delete table inet "$nodes_table" 2>/dev/null || true
        if [[ -f "$nodes_lock/kube-proxy" ]]; then
            nft delete table ip kube-proxy 2>/dev/null || true
            nft delete table ip6 kube-proxy 2>/dev/null || true
        fi
        rm -f /var/lib/cni/results/"$nodes_network"-*
        if [[ -f "$nodes_lock/sysctls" ]]; then
            while read -r name value; do sysctl -qw "$name=$value" || ok=1; done <"$nodes_lock/sysctls"
        fi
        for file in "${nodes_host_dirs[@]}"; do
            if [[ -f "$nodes_lock/made${file//\//_}" ]]; then rmdir "$file" 2>/dev/null || true; fi
        done
        rm -rf "$nodes_lock"
    fi
    rm -f "$dir/kubelets"
    shopt -u nullglob
    return "$ok"
}

# Before `up` starts in STATE: clean what a cut-short run left, in STATE and in the control plane the lock names,
# unless that one still runs (then, if real nodes are wanted, fail: one set of real nodes a machine).
nodes_clean_leftovers() { # WANT_NODES(true|false)
    local owner=""
    [[ -f "$nodes_lock/owner" ]] && owner="$(cat "$nodes_lock/owner")"
    if [[ -n "$owner" && "$owner" != "$state" ]] && recorded_alive "$owner/pids" && ! run_owner_gone "$owner"; then
        if $1; then
            die "real nodes of the control plane in $owner still run (one set a machine): stop them with" \
                "CONTROLPLANE_STATE=$owner $0 down"
        fi
    elif [[ -n "$owner" ]]; then
        log "cleaning what the real nodes of a cut-short run in $owner left"
        stop_recorded "$owner/pids"
        nodes_clean "$owner" || die "real nodes: could not clean what the run in $owner left (see above)"
    fi
    if [[ -d "$state" && ( -f "$state/kubelets" || -n "$(mounts_under "$state")" ) ]]; then
        log "cleaning what the real nodes of a cut-short run in $state left"
        nodes_clean "$state" || die "real nodes: could not clean what the run in $state left (see above)"
    fi
}

# --- DRA drivers -----------------------------------------------------------------------------------------------

# The class whose devices every real node's drivers publish (an InferenceClass YAML; the seed's by default).
nodes_class="${CONTROLPLANE_KUBELET_CLASS:-$repo/examples/classes/eks-h200-8x.yaml}"

# A Python that has PyYAML: the tests' virtualenv when there is one (tests/run.sh makes it first), else python3.
nodes_python() {
    if [[ -x "$repo/.venv/bin/python" ]]; then echo "$repo/.venv/bin/python"; else command -v python3; fi
}

driver_registered() { grep -q 'registered with the kubelet' "$state/$1.log"; }

# On each of N Ready nodes, one test DRA driver per driver of $nodes_class publishing that class's devices (one
# ResourceSlice a node), preparing claims into files under the node's state and CDI specs into the directory its
# containerd reads; and the DeviceClasses the drivers' charts install. Returns once every driver is registered.
nodes_drivers_up() { # N
    local n="$1" i k node dir name drivers=() file
    [[ -f "$nodes_class" ]] || die "dra-driver: CONTROLPLANE_KUBELET_CLASS: no InferenceClass file at $nodes_class"
    readarray -t drivers < <("$(nodes_python)" "$here/python/node_devices.py" "$nodes_class" "$state/dra") ||
        die "dra-driver: could not write the devices of $nodes_class (node_devices.py)"
    if ((${#drivers[@]} == 0)); then
        log "dra-driver: ${nodes_class#"$repo"/} has no DRA devices; no driver runs"
        return 0
    fi
    for file in "$state"/dra/deviceclass-*.json; do
        api POST /apis/resource.k8s.io/v1/deviceclasses -H 'Content-Type: application/json' \
            --data-binary "@$file" >/dev/null || die "dra-driver: could not create DeviceClass from ${file##*/}"
    done
    # A unix socket's path has at most 107 bytes: the kubelet and the driver meet at this one.
    local socket="$state/$(node_name $((n - 1)))/root/plugins_registry/${drivers[0]}-reg.sock"
    ((${#socket} <= 107)) || die "dra-driver: the state directory $state is too long for the driver's" \
        "registration socket ($socket: ${#socket} bytes, at most 107): use a shorter CONTROLPLANE_STATE"
    for ((i = 0; i < n; i++)); do
        node="$(node_name "$i")"
        dir="$state/$node"
        for k in "${!drivers[@]}"; do
            name="dra-driver-$i"
            if ((k > 0)); then name+="-$k"; fi
            start "$name" "$bin_dir/dra-driver" --driver-name "${drivers[$k]}" --node-name "$node" \
                --kubeconfig "$state/kubeconfig" --kubelet-root "$dir/root" --cdi-dir "$dir/cdi" \
                --devices "$state/dra/${drivers[$k]}.devices.json"
        done
    done
    for ((i = 0; i < n; i++)); do
        for k in "${!drivers[@]}"; do
            name="dra-driver-$i"
            if ((k > 0)); then name+="-$k"; fi
            wait_ready "$name" driver_registered "$name"
        done
    done
    log "dra-driver: ${drivers[*]} on $n nodes, devices of ${nodes_class#"$repo"/}"
}

# namespace/name of every pod bound to a real node.
nodes_pods() {
    api GET /api/v1/pods | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["spec"].get("nodeName", "").startswith("kubelet-"):
        print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"])'
}

# Before `down` stops the processes, while the API server still answers: the pods on the real nodes go (so the
# drivers unprepare their claims), then the drivers, then their ResourceSlices (a running driver would publish
# them again). Bounded; skipped when the API server is gone (a run cut short: nodes_clean removes what is left).
nodes_drivers_down() {
    local n i
    [[ -f "$state/kubelets" && -f "$pids_file" ]] || return 0
    api GET /readyz >/dev/null 2>&1 || return 0
    n="$(cat "$state/kubelets")"
    local pod deadline=$((SECONDS + 60)) left=""
    while :; do
        left="$(nodes_pods)" || break
        [[ -n "$left" ]] || break
        if ((SECONDS >= deadline)); then
            log "real nodes: pods still on the kubelets after 60s, stopping anyway: ${left//$'\n'/ }"
            break
        fi
        for pod in $left; do
            api DELETE "/api/v1/namespaces/${pod%/*}/pods/${pod#*/}" >/dev/null 2>&1 || true
        done
        sleep 1
    done
    grep '^dra-driver-' "$pids_file" >"$state/pids.drivers" || true
    stop_recorded "$state/pids.drivers"
    for ((i = 0; i < n; i++)); do
        api DELETE "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D$(node_name "$i")" \
            >/dev/null 2>&1 || log "dra-driver: could not delete the ResourceSlices of $(node_name "$i")"
    done
}

# --- start -----------------------------------------------------------------------------------------------------

nodes_lock_take() {
    mkdir "$nodes_lock" 2>/dev/null || die "real nodes: $nodes_lock exists (another control plane's nodes?)"
    echo "$state" >"$nodes_lock/owner"
    local name dir
    for name in "${nodes_sysctls[@]}"; do
        echo "$name $(sysctl -n "$name")" >>"$nodes_lock/sysctls"
    done
    for dir in "${nodes_host_dirs[@]}"; do
        [[ -d "$dir" ]] || : >"$nodes_lock/made${dir//\//_}"
    done
}

# The network of N nodes: bridges first (the kubelet's node IP must exist), and our table, which lets forwarded
# traffic pass only between the suite's bridges and keeps the node addresses off every other interface.
nodes_network_up() { # N
    local i
    for ((i = 0; i < $1; i++)); do
        ip link add name "mpbr$i" type bridge || die "real nodes: could not create bridge mpbr$i"
        ip addr add "10.244.$i.1/24" dev "mpbr$i" && ip link set "mpbr$i" up ||
            die "real nodes: could not address bridge mpbr$i"
    done
    nft -f - <<EOF || die "real nodes: nft could not load table inet $nodes_table"
table inet $nodes_table {
    chain forward {
        type filter hook forward priority 0; policy accept;
        iifname "mpbr*" oifname "mpbr*" accept
        iifname "mpbr*" drop
        oifname "mpbr*" drop
    }
    chain input {
        type filter hook input priority 0; policy accept;
        iifname "lo" accept
        iifname "mpbr*" accept
        ip daddr 10.244.0.0/16 drop
        tcp dport $api_port drop
    }
}
EOF
    # Pods reach each other's bridges and the Services through this machine's routing.
    sysctl -qw net.ipv4.ip_forward=1 || die "real nodes: could not enable net.ipv4.ip_forward"
}

# Node i's cgroup root, in every hierarchy: two kubelets sharing one would remove each other's pods' cgroups.
node_cgroup_up() { # NODE
    local hierarchy dir
    for hierarchy in /sys/fs/cgroup/*/; do
        dir="$hierarchy$nodes_cgroup/$1"
        mkdir -p "$dir" || die "$1: could not create cgroup $dir"
        if [[ "${hierarchy%/}" == */cpuset ]]; then
            # A v1 cpuset starts empty; a process cannot join it before it has CPUs and memory nodes.
            cat "${hierarchy}cpuset.cpus" >"$hierarchy$nodes_cgroup/cpuset.cpus"
            cat "${hierarchy}cpuset.mems" >"$hierarchy$nodes_cgroup/cpuset.mems"
            cat "${hierarchy}cpuset.cpus" >"$dir/cpuset.cpus"
            cat "${hierarchy}cpuset.mems" >"$dir/cpuset.mems"
        fi
    done
}

# containerd 2.x's v3 config: the CRI plugins split into runtime and images; CDI is always on (2.x dropped the
# `enable_cdi` switch), reading the specs the node's DRA drivers write to $dir/cdi.
containerd_config() { # NODE_DIR INDEX
    local dir="$1" i="$2" runtime="plugins.'io.containerd.cri.v1.runtime'"
    local images="plugins.'io.containerd.cri.v1.images'"
    cat >"$dir/containerd.toml" <<EOF
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
# Plugins that would use machine-wide paths (/opt/containerd) or that no node needs.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$dir/containerd.sock"

[ttrpc]
  address = "$dir/containerd.sock.ttrpc"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

# NRI would listen on /var/run/nri/nri.sock, one socket a machine.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[$images]
  snapshotter = "overlayfs"

[$images.pinned_images]
  sandbox = "$pause_image"

# Where a test says how to reach a registry (certs.d/HOST:PORT/hosts.toml): the install test's loopback-bridge
# registry serves plain HTTP, which containerd uses for a host only when told so. Read at every pull.
[$images.registry]
  config_path = "$dir/certs.d"

[$runtime]
  cdi_spec_dirs = ["$dir/cdi"]
  # Processes here lack CAP_SYS_RESOURCE: runc cannot give a sandbox the OOM score -998 containerd asks for.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true

[$runtime.containerd]
  default_runtime_name = "runc"

[$runtime.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[$runtime.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "$dir/runc"

[$runtime.cni]
  bin_dirs = ["$cni_bin"]
  conf_dir = "$dir/cni"
  max_conf_num = 1
EOF
    mkdir -p "$dir/cni"
    cat >"$dir/cni/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$nodes_network-$i",
  "plugins": [
    {
      "type": "bridge", "bridge": "mpbr$i", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni-ipam",
        "ranges": [[{"subnet": "10.244.$i.0/24", "gateway": "10.244.$i.1"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

containerd_ready() { "$bin_dir/ctr" --address "$1" version; }

node_ready() { # NODE
    api GET "/api/v1/nodes/$1" 2>/dev/null | python3 -c '
import json, sys
conditions = json.load(sys.stdin).get("status", {}).get("conditions", [])
sys.exit(not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions))'
}

node_kubeconfig() { # FILE CERT (both under $state/pki)
    local pki="$state/pki"
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "$api_server", certificate-authority: $pki/ca.crt}
users:
- name: user
  user: {client-certificate: $pki/$2.crt, client-key: $pki/$2.key}
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
EOF
}

# "key=value:Effect,key:Effect" as YAML list items.
taints_yaml() { # TAINTS
    local taint key value effect list
    [[ -n "$1" ]] || { echo "registerWithTaints: []"; return; }
    echo "registerWithTaints:"
    IFS=, read -ra list <<<"$1"
    for taint in "${list[@]}"; do
        [[ "$taint" =~ ^([^=:]+)(=([^:]*))?:([A-Za-z]+)$ ]] ||
            die "CONTROLPLANE_KUBELET_TAINTS: '$taint' is not key[=value]:Effect"
        key="${BASH_REMATCH[1]}" value="${BASH_REMATCH[3]}" effect="${BASH_REMATCH[4]}"
        echo "- {key: \"$key\", value: \"$value\", effect: \"$effect\"}"
    done
}

kubelet_config() { # NODE_DIR INDEX PORT HEALTHZ_PORT
    local dir="$1" i="$2" pki="$state/pki" node taints
    node="$(node_name "$i")"
    # Not inside the here-document: a bad taint must stop the script, not only a command substitution.
    taints="$(taints_yaml "${CONTROLPLANE_KUBELET_TAINTS-$kubelet_default_taint}")" || exit 1
    cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 10.244.$i.1
port: $3
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $4
tlsCertFile: $pki/$node.crt
tlsPrivateKeyFile: $pki/$node.key
authentication:
  x509: {clientCAFile: $pki/ca.crt}
  webhook: {enabled: false}
  anonymous: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$dir/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$nodes_cgroup/$node
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
clusterDNS: [$cluster_dns]
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $dir/pod-logs
volumePluginDir: $dir/volume-plugins
# This machine's disk may be nearly full: nothing is evicted or garbage-collected for it.
evictionHard: {memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%",
  imagefs.inodesFree: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
shutdownGracePeriod: 0s
rotateCertificates: false
serializeImagePulls: false
$taints
EOF
}

# The label and taint every real node has: pods land there only when they ask to (a pod that cannot run here, its
# image never built, would otherwise fail where a simulated node would have taken it).
kubelet_label=modelplane.test/kubelet=true
kubelet_default_taint=modelplane.test/kubelet=true:NoSchedule

# Starts N real nodes on the running control plane (kube-apiserver, kube-scheduler, kube-controller-manager).
nodes_up() { # N
    local n="$1" i node dir pki="$state/pki" kubelet_port healthz_port
    echo "$n" >"$state/kubelets"
    nodes_install
    command -v python3 >/dev/null || die "real nodes: python3 is needed (the image tool)"
    nodes_lock_take
    nodes_network_up "$n"

    # The pause image every pod's sandbox runs, from our static pause binary.
    mkdir -p "$state/images"
    python3 "$here/python/images.py" build "$pause_image" "$state/images/pause.tar" --entrypoint /pause \
        --file "/pause=$bin_dir/pause" || die "real nodes: could not build the pause image"

    api POST /apis/rbac.authorization.k8s.io/v1/clusterrolebindings -H 'Content-Type: application/json' -d '{
      "metadata": {"name": "modelplane-test-nodes"},
      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}' \
        >/dev/null || die "real nodes: could not bind group system:nodes to ClusterRole system:node"

    for ((i = 0; i < n; i++)); do
        node="$(node_name "$i")"
        dir="$state/$node"
        mkdir -p "$dir"
        containerd_config "$dir" "$i"
        mkdir -p "$dir/cdi" "$dir/certs.d"
        # containerd finds its shim (containerd-shim-runc-v2) on PATH; runc is Debian's.
        PATH="$bin_dir:$PATH" start "containerd-$i" "$bin_dir/containerd" --config "$dir/containerd.toml"
        wait_ready "containerd-$i" containerd_ready "$dir/containerd.sock"
        "$bin_dir/ctr" --address "$dir/containerd.sock" --namespace k8s.io images import "$state/images/pause.tar" \
            >>"$state/containerd-$i.log" 2>&1 || die "containerd-$i: could not import the pause image"
    done

    local dns_ready
    dns_ready="$(free_port)"
    cat >"$state/Corefile" <<EOF
cluster.local:53 {
    bind $cluster_dns
    errors
    ready 127.0.0.1:$dns_ready
    kubernetes cluster.local {
        kubeconfig $state/kubeconfig test
    }
}
EOF
    start coredns "$bin_dir/coredns" -conf "$state/Corefile"
    wait_ready coredns http_ok "$dns_ready" /ready

    for ((i = 0; i < n; i++)); do
        node="$(node_name "$i")"
        dir="$state/$node"
        sign "$node" "/O=system:nodes/CN=system:node:$node" "$(printf '%s\n' \
            "subjectAltName=IP:10.244.$i.1,DNS:$node" "extendedKeyUsage=clientAuth,serverAuth")"
        node_kubeconfig "$dir/kubeconfig" "$node"
        node_cgroup_up "$node"
        kubelet_port="$(free_port)"
        healthz_port="$(free_port)"
        kubelet_config "$dir" "$i" "$kubelet_port" "$healthz_port"
        local labels="$kubelet_label${CONTROLPLANE_KUBELET_LABELS:+,$CONTROLPLANE_KUBELET_LABELS}"
        start "kubelet-$i" "$bin_dir/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubeconfig" \
            --root-dir "$dir/root" --hostname-override "$node" --node-ip "10.244.$i.1" \
            --node-labels "$labels"
    done
    for ((i = 0; i < n; i++)); do wait_ready "kubelet-$i" node_ready "$(node_name "$i")"; done

    local proxy_healthz proxy_metrics
    proxy_healthz="$(free_port)"
    proxy_metrics="$(free_port)"
    sign kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
    node_kubeconfig "$state/kube-proxy.kubeconfig" kube-proxy
    cat >"$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
hostnameOverride: $(node_name 0)
clusterCIDR: 10.244.0.0/16
healthzBindAddress: 127.0.0.1:$proxy_healthz
metricsBindAddress: 127.0.0.1:$proxy_metrics
# Zero leaves the machine's conntrack settings as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
    : >"$nodes_lock/kube-proxy"
    start kube-proxy "$bin_dir/kube-proxy" --config "$state/kube-proxy.yaml"
    wait_ready kube-proxy http_ok "$proxy_healthz" /healthz

    nodes_drivers_up "$n"

    local names=()
    for ((i = 0; i < n; i++)); do names+=("$(node_name "$i")"); done
    kubelets_export="$(IFS=,; echo "${names[*]}")"
}
