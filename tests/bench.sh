#!/usr/bin/env bash
# The RunFunction benchmark in one command: builds our server, the function-sdk-rust no-op and the bench client
# (release), sets up the Python SDK venv at <repo>/.venv, then runs all three servers side by side on loopback
# and prints the table. Arguments go to the bench binary (e.g. `tests/bench.sh --scale 0.1` for a quick run).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
cd "$repo"

cargo build --release --quiet -p modelplane-function -p modelplane-tests --bin modelplane-function --bin bench
# Its own workspace (see its Cargo.toml); built into the same target directory.
cargo build --release --quiet --manifest-path tests/peers/noop-rust/Cargo.toml --target-dir "$target"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt

exec "$target/release/bench" \
  --ours "$target/release/modelplane-function" \
  --rust-noop "$target/release/noop-rust" \
  --python "$repo/.venv/bin/python" \
  --python-noop "$repo/tests/peers/noop_python.py" \
  "$@"
