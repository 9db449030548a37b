#!/usr/bin/env bash
# Every test of the project, as CI runs it: bash tests/run.sh [extra pytest arguments]
#
# Builds (or reuses) the Python venv at .venv from tests/requirements.txt, then runs rustfmt, clippy, the Rust
# tests, builds the binaries, and runs the Python black-box tests against the real modelplane-function binary.
# Stops at the first failing step and says which one.
#
# Two jobs run in the background while the Rust workspace builds in the foreground, because on a cold 2-core
# machine the steps one after another leave cores idle (docs/benchmarks.md, "The test suite"): the real control
# plane's Go build (needed from `cargo test` on), and the fuzz targets' nightly build and bounded run at the lowest
# CPU priority (it takes only cycles nothing else wants; waited for at the end). Each logs to tests/.ci-logs/ and is waited for where
# its result is needed; a failure there names the build and prints its log's tail.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

venv="$repo/.venv"
requirements="tests/requirements.txt"
# The venv is rebuilt only when the requirements change; the stamp records which file it was built from.
stamp="$venv/.requirements.sha256"

step() { printf '\n==> %s\n' "$*"; }
fail() {
    printf '\nFAILED: %s\n' "$*" >&2
    exit 1
}

# --- Background builds ----------------------------------------------------------------------------------------------
logs="$repo/tests/.ci-logs"
declare -A background=()
# Whatever still runs when this script ends (a failed step, a signal) is stopped with it, not left behind.
stop_background() {
    local pid
    for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap stop_background EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
start_background() { # NAME COMMAND...: runs COMMAND in a process group of its own, output to $logs/NAME.log
    local name="$1"
    shift
    mkdir -p "$logs"
    printf '\n==> started in the background: %s (log: tests/.ci-logs/%s.log)\n' "$name" "$name"
    setsid "$@" >"$logs/$name.log" 2>&1 &
    background[$name]=$!
}
wait_background() { # NAME WHAT-FAILED: waits for NAME, prints its log, fails with WHAT-FAILED if it failed
    local name="$1" status=0
    step "waiting for the background build: $name"
    wait "${background[$name]}" || status=$?
    unset "background[$name]"
    if ((status != 0)); then
        tail -n 40 "$logs/$name.log" >&2
        fail "$2 (exit $status; log: tests/.ci-logs/$name.log)"
    fi
    cat "$logs/$name.log"
}

command -v cargo >/dev/null || fail "cargo is not on PATH (install Rust from rustup.rs)"

# A one-shot build (CI's fresh clone) gains nothing from incremental compilation's caches, which would be about
# half of the target directory; a developer's rerun keeps them unless told otherwise.
if [[ -n "${CI:-}" ]]; then export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"; fi

# Free space, checked before anything builds: a full disk otherwise surfaces as a linker crash deep in the run.
# A cold run writes about 12 GiB (Rust target, Go caches, the fuzz build); a warm one little.
build_dir="${CARGO_TARGET_DIR:-$repo/target}"
need_gib=4
[[ -d "$build_dir/debug" ]] || need_gib=16
free_gib=$(($(df -Pk "$(dirname "$build_dir")" | awk 'NR == 2 {print $4}') / 1024 / 1024))
((free_gib >= need_gib)) ||
    fail "only $free_gib GiB free for $build_dir; this run needs about $need_gib GiB (free some, or point CARGO_TARGET_DIR elsewhere)"

command -v python3 >/dev/null || fail "python3 is not on PATH (Python 3.11 or later is needed)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    fail "Python 3.11 or later is needed (crossplane-function-sdk-python requires it); found $(python3 -V 2>&1)"

wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null || true)" != "$wanted" ]]; then
    step "Python venv $venv from $requirements"
    # Start from scratch so packages dropped from the pins do not linger.
    rm -rf "$venv"
    python3 -m venv "$venv" || fail "python3 -m venv could not create $venv (Debian: apt-get install python3-venv)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements" ||
        fail "pip could not install $requirements"
    echo "$wanted" >"$stamp"
else
    step "Python venv $venv is up to date with $requirements"
fi

# The control plane's Go build: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Crossplane core,
# provider-kubernetes, Prometheus and promtool from pinned Go modules (tests/controlplane; Go's caches make later
# runs fast). provider-eks' end-to-end tests (provider-eks/tests/e2e*.rs) start a kube-apiserver from these binaries
# inside `cargo test`.
command -v go >/dev/null || fail "go is not on PATH (Go 1.26 or later is needed, https://go.dev/dl/)"
start_background controlplane-build bash tests/controlplane/controlplane.sh build

# The fuzz targets (nightly, cargo-fuzz): built, then each run for FUZZ_SECONDS (default 60; 0 skips fuzzing) from
# seeds taken from the examples, all at the lowest CPU priority beside the foreground steps, so they take only
# cycles nothing else wants and add no wall time. docs/testing.md, "Fuzzing", says how to run longer.
fuzz_seconds="${FUZZ_SECONDS:-60}"
fuzz_targets=(run_function_proto run_function_json cel_selector struct_pointer)
fuzz_every_target() {
    rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal ||
        { echo "cargo fuzz needs a nightly toolchain" >&2; return 1; }
    command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz ||
        { echo "cannot install cargo-fuzz" >&2; return 1; }
    cd "$repo/fuzz" || return 1
    # Every target of fuzz/ at once (`cargo fuzz build` takes one target or none); `cargo fuzz run` with the same
    # flags reuses this build.
    cargo +nightly fuzz build --sanitizer none || { echo "the fuzz targets did not build" >&2; return 1; }
    local target corpus
    for target in "${fuzz_targets[@]}"; do
        corpus="$repo/fuzz/corpus/$target"
        mkdir -p "$corpus"
        cp "$repo/fuzz/seeds/$target/"* "$corpus/"
        echo "==> cargo fuzz run $target: $fuzz_seconds s"
        cargo +nightly fuzz run --sanitizer none "$target" "$corpus" -- -max_total_time="$fuzz_seconds" \
            -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 ||
            { echo "fuzz target $target failed: the crashing input is in fuzz/artifacts/$target" >&2; return 1; }
    done
}
if [[ "$fuzz_seconds" != 0 ]]; then
    start_background fuzz nice -n 19 bash -c \
        "$(declare -p repo fuzz_seconds fuzz_targets); $(declare -f fuzz_every_target); fuzz_every_target"
fi

step "cargo fmt --all --check"
cargo fmt --all --check || fail "code is not formatted: run cargo fmt --all"

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings || fail "clippy found problems"

# Built while the control plane's Go build still runs; the tests themselves need its binaries.
step "cargo test --workspace --no-run (build the tests)"
cargo test --workspace --no-run || fail "the Rust tests did not build"

# --- Real control plane, built before the Rust tests run (tests/controlplane) --------------------------------------
# Inside `cargo test` each end-to-end test binary starts a kube-apiserver with controlplane.sh (its processes stop
# when the test binary ends), so the Go build must have finished here.
wait_background controlplane-build "a control-plane component did not build (named above)"
# --- end of the control-plane build block ---------------------------------------------------------------------------

step "cargo test --workspace"
cargo test --workspace || fail "Rust tests failed"

# No separate `cargo build`: `cargo test` already built every binary that has integration tests, and a plain
# build would resolve features without the dev-dependencies and compile the AWS SDK a second time.

# Ask cargo where it put them: CARGO_TARGET_DIR or build.target-dir may move the target directory.
target_dir="$(cargo metadata --format-version 1 --no-deps |
    "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
export MODELPLANE_FUNCTION_BIN="$target_dir/debug/modelplane-function"
[[ -x "$MODELPLANE_FUNCTION_BIN" ]] || fail "no binary at $MODELPLANE_FUNCTION_BIN after cargo test"

step "modelplane-package check (packages, XRD schemas and CEL, Compositions, examples)"
"$target_dir/debug/modelplane-package" check || fail "the Crossplane packages or examples have problems"

step "pytest tests/python (MODELPLANE_FUNCTION_BIN=$MODELPLANE_FUNCTION_BIN)"
status=0
"$venv/bin/python" -m pytest tests/python -q -p no:cacheprovider "$@" || status=$?
case "$status" in
0) ;;
5) fail "pytest collected no tests" ;;
*) fail "Python tests failed (pytest exit $status)" ;;
esac

# --- Real control plane (tests/controlplane) ----------------------------------------------------------------------
# The binaries built above, started on loopback; the admission, Crossplane-in-the-loop and simulated-node tests run
# against them (kube-scheduler places pods on nodes kwok simulates). controlplane.sh stops every process it started
# when the tests end, pass or fail.
step "pytest tests/controlplane/python on the real control plane"
status=0
bash tests/controlplane/controlplane.sh run --crossplane --nodes -- \
    "$venv/bin/python" -m pytest tests/controlplane/python -q \
    --ignore=tests/controlplane/python/test_real_nodes.py \
    --ignore=tests/controlplane/python/test_gangs_live.py \
    --ignore=tests/controlplane/python/test_serving_live.py \
    --ignore=tests/controlplane/python/test_stage_live.py \
    --ignore=tests/controlplane/python/test_install.py \
    --ignore=tests/controlplane/python/test_upgrade.py \
    --ignore=tests/controlplane/python/test_least_privilege.py || status=$?
((status == 0)) || fail "control-plane tests failed (exit $status; logs in tests/controlplane/.run/)"

# Then the packages installed as a user installs them, on a control plane of their own (without the harness's
# Crossplane) with one real node: built with the real Crossplane CLI, pushed to a registry on the node's bridge,
# and installed by Crossplane running as a pod from its Helm chart, with the package manager resolving every
# dependency and the function's and provider-kubernetes' pods running from their packages (test_install.py), then
# another release and back on the same installation (test_upgrade.py), then the RBAC each package's ServiceAccount
# holds (test_least_privilege.py): one pytest invocation, one installation.
step "pytest test_install.py, test_upgrade.py, test_least_privilege.py: the packages installed by Crossplane"
status=0
bash tests/controlplane/controlplane.sh run --kubelets 1 -- \
    "$venv/bin/python" -m pytest tests/controlplane/python/test_install.py \
    tests/controlplane/python/test_upgrade.py tests/controlplane/python/test_least_privilege.py -q || status=$?
((status == 0)) || fail "install tests failed (exit $status; logs in tests/controlplane/.run/)"

# Then containers that really run: two kubelets with containerd 2.x (built here, CDI), a DRA driver each, kube-proxy
# and CoreDNS (controlplane.sh installs Debian's runc, CNI plugins, nftables and busybox-static where missing, and
# removes every container, mount, bridge and rule it made when the tests end), with Crossplane and our function. The
# nodes are labelled and tainted as a node of the example Existing cluster's GPU pool is
# (examples/clusters/existing-onprem.yaml: pool `gpu`, the GPU taint and the cluster's own), so what the function
# composes for that cluster lands on them; the tests' own pods tolerate every taint.
step "pytest test_real_nodes.py, test_gangs_live.py, test_serving_live.py and test_stage_live.py on real nodes"
status=0
CONTROLPLANE_KUBELET_LABELS=modelplane.ai/pool=gpu \
    CONTROLPLANE_KUBELET_TAINTS=nvidia.com/gpu=true:NoSchedule,modelplane.ai/site=onprem:NoSchedule \
    bash tests/controlplane/controlplane.sh run --crossplane --nodes --kubelets 2 -- \
    "$venv/bin/python" -m pytest tests/controlplane/python/test_real_nodes.py \
    tests/controlplane/python/test_gangs_live.py tests/controlplane/python/test_serving_live.py \
    tests/controlplane/python/test_stage_live.py -q || status=$?
((status == 0)) || fail "real-node tests failed (exit $status; logs in tests/controlplane/.run/)"
# --- end of the control-plane block ---------------------------------------------------------------------------------

# --- Fuzzing: started in the background at the top; its log names a failing target and where its input is -------
if [[ "$fuzz_seconds" != 0 ]]; then
    wait_background fuzz "fuzzing failed (named above)"
fi

step "all tests passed"
