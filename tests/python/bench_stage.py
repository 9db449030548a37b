"""Benchmark (not a test): staging a multi-GiB synthetic repo from the Hub stand-in on loopback, our downloader
(`modelplane-function stage`) against huggingface_hub's own `snapshot_download`, in the same run.

    .venv/bin/python tests/python/bench_stage.py --binary target/release/modelplane-function [--gib 2 --files 4]

Each round stages into a fresh cache directory (one on disk at a time), ours then huggingface_hub's, each in a process of its own whose
peak resident memory is read from the kernel (wait4). The stand-in serves from files with sendfile, in a process of
its own too. Prints one Markdown table row per downloader: the best round's wall time and throughput, and the peak
RSS. Both results are checked: ours resolves offline through huggingface_hub, and both hold the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hub_standin  # noqa: E402

REPO_ID = "bench/synthetic"
BLOCK = 16 << 20


def make_files(root: Path, gib: float, files: int) -> dict[str, Path]:
    """`files` weight files totalling `gib` GiB (random bytes, each file distinct), plus a small config."""
    size = int(gib * (1 << 30)) // files
    block = os.urandom(BLOCK)
    made = {"config.json": root / "config.json"}
    made["config.json"].write_text('{"architectures": ["SyntheticForCausalLM"]}\n')
    for i in range(files):
        path = root / f"model-{i + 1:05d}-of-{files:05d}.safetensors"
        with path.open("wb") as out:
            written = 0
            while written < size:
                chunk = (i.to_bytes(4, "little") + written.to_bytes(8, "little") + block)[: min(BLOCK, size - written)]
                out.write(chunk)
                written += len(chunk)
        made[path.name] = path
    return made


def serve(files: dict[str, Path], ready) -> None:
    standin = hub_standin.HubStandIn(hub_standin.repo(REPO_ID, files))
    # Hash once before the clock starts for anyone: the listing carries every SHA-256.
    for f in standin.repos[REPO_ID].files:
        standin.repos[REPO_ID].etag(f)
    with standin:
        ready.send(standin.endpoint)
        ready.recv()


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Runs `argv`; answers its wall time in seconds and its peak RSS in KiB."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed: {process.stderr.read().decode() if process.stderr else ''}")
    return elapsed, usage.ru_maxrss


def snapshot_files(root: Path) -> dict[str, str]:
    def digest(path: Path) -> str:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="modelplane-function (a release build)")
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--dir", help="where to write the repo and the caches (default: a temporary directory)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-stage-", dir=args.dir))
    try:
        source = work / "source"
        source.mkdir()
        files = make_files(source, args.gib, args.files)
        total = sum(p.stat().st_size for p in files.values())
        ours_end, theirs_end = multiprocessing.Pipe()
        server = multiprocessing.Process(target=serve, args=(files, theirs_end), daemon=True)
        server.start()
        endpoint = ours_end.recv()
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
        results: dict[str, list[tuple[float, int]]] = {"ours": [], "huggingface_hub": []}
        for round_ in range(args.rounds):
            cache = work / f"ours-{round_}"
            results["ours"].append(timed(
                [args.binary, "stage", "--repo", REPO_ID, "--cache-dir", str(cache), "--endpoint", endpoint,
                 "--concurrency", str(args.concurrency)], env | {"RUST_LOG": "warn"}))
            check = ("import sys\nfrom huggingface_hub import snapshot_download\n"
                     "print(snapshot_download(sys.argv[1], local_files_only=True))")
            resolved = subprocess.run([sys.executable, "-c", check, REPO_ID], capture_output=True, text=True,
                                      env=env | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}, check=True)
            ours_files = snapshot_files(Path(resolved.stdout.strip()))
            shutil.rmtree(cache)  # one cache on disk at a time
            theirs = work / f"theirs-{round_}"
            download = ("import sys\nfrom huggingface_hub import snapshot_download\n"
                        "print(snapshot_download(sys.argv[1], max_workers=int(sys.argv[2])))")
            results["huggingface_hub"].append(timed(
                [sys.executable, "-c", download, REPO_ID, str(args.concurrency)],
                env | {"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(theirs), "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                       "HF_HUB_DISABLE_TELEMETRY": "1"}))
            theirs_snapshot = next((theirs / "models--bench--synthetic" / "snapshots").iterdir())
            assert ours_files == snapshot_files(theirs_snapshot), "the two caches differ"
            shutil.rmtree(theirs)
        ours_end.send("stop")
        server.join(timeout=30)

        print(f"{total / (1 << 30):.2f} GiB in {len(files)} files, {args.rounds} rounds, concurrency "
              f"{args.concurrency}, best round:\n")
        print("| downloader | wall | throughput | peak RSS |")
        print("| --- | --- | --- | --- |")
        best = {}
        for name, rounds in results.items():
            seconds = min(r[0] for r in rounds)
            rss = max(r[1] for r in rounds)
            best[name] = seconds
            print(f"| {name} | {seconds:.2f} s | {total / seconds / (1 << 20):.0f} MiB/s | {rss / 1024:.0f} MiB |")
        print(f"\nours / huggingface_hub throughput: {best['huggingface_hub'] / best['ours']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
