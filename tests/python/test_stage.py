"""`modelplane-function stage` as a process against a stand-in of the Hub on loopback: the cache it writes is what
the real huggingface_hub resolves offline, and faults (a kill halfway, bad bytes, refusals, throttling, cuts) end
as they should."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hub_standin
from conftest import function_binary

REPO_ID = "acme/tiny-model"
FILES = {
    "config.json": b'{"architectures": ["TinyForCausalLM"], "hidden_size": 8}\n',
    "tokenizer/vocab.txt": b"\n".join(f"token{i}".encode() for i in range(50)),
    "model-00001-of-00002.safetensors": os.urandom(3 << 20),
    "model-00002-of-00002.safetensors": os.urandom(8 << 20),
}
BIG = "model-00002-of-00002.safetensors"
# Generous: a stage run here takes well under a second; the bound only keeps a hung run from hanging the suite.
RUN_TIMEOUT = 120
# huggingface_hub reads these at import; a developer's shell must not leak them into the resolving process.
HUB_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE", "HUGGINGFACE_HUB_CACHE")
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
             "all_proxy")


@pytest.fixture
def hub():
    with hub_standin.HubStandIn(hub_standin.repo(REPO_ID, FILES),
                                hub_standin.repo("acme/gated", FILES, token="hf_secret")) as standin:
        yield standin


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HUB_ENV + PROXY_ENV and not k.startswith("STAGE_")}
    env.update(extra)
    return env


def stage_command(hub, cache: Path, repo: str = REPO_ID, revision: str = "main", *extra: str) -> list[str]:
    return [str(function_binary()), "stage", "--repo", repo, "--revision", revision, "--cache-dir", str(cache),
            "--endpoint", hub.endpoint, "--concurrency", "3", "--attempts", "4", "--backoff-ms", "1",
            "--max-backoff-ms", "20", "--progress-file", str(cache.parent / "progress.json"), *extra]


def stage(hub, cache: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(stage_command(hub, cache, *args), capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env=env or clean_env())


def progress(cache: Path) -> dict[str, str]:
    return json.loads((cache.parent / "progress.json").read_text())


def resolve_offline(cache: Path, repo: str = REPO_ID, revision: str = "main") -> dict[str, bytes]:
    """What the real huggingface_hub, offline, resolves the repo to: every file of the snapshot by path."""
    script = """
import json, os, sys
from pathlib import Path
from huggingface_hub import snapshot_download, try_to_load_from_cache
repo, revision = sys.argv[1], sys.argv[2]
root = Path(snapshot_download(repo, revision=revision, local_files_only=True))
files = {str(p.relative_to(root)): p.read_bytes().hex() for p in sorted(root.rglob("*")) if p.is_file()}
assert try_to_load_from_cache(repo, "config.json", revision=revision) == str(root / "config.json")
print(json.dumps(files))
"""
    done = subprocess.run([sys.executable, "-c", script, repo, revision], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, env=clean_env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache)))
    assert done.returncode == 0, done.stderr
    return {path: bytes.fromhex(content) for path, content in json.loads(done.stdout).items()}


def resolves(cache: Path) -> bool:
    script = "import sys\nfrom huggingface_hub import snapshot_download\nsnapshot_download(sys.argv[1], " \
             "local_files_only=True)"
    return subprocess.run([sys.executable, "-c", script, REPO_ID], capture_output=True, timeout=RUN_TIMEOUT,
                          env=clean_env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))).returncode == 0


def test_staged_cache_is_what_huggingface_hub_resolves_offline(hub, tmp_path):
    cache = tmp_path / "cache"
    done = stage(hub, cache)
    assert done.returncode == 0, done.stderr
    assert resolve_offline(cache) == FILES
    folder = cache / "models--acme--tiny-model"
    commit = hub.repos[REPO_ID].commit
    assert (folder / "refs" / "main").read_text() == commit
    link = folder / "snapshots" / commit / "tokenizer" / "vocab.txt"
    assert link.is_symlink() and os.readlink(link).startswith("../../../blobs/")
    assert not list(folder.rglob("*.incomplete"))
    report = progress(cache)
    total = sum(len(c) for c in FILES.values())
    assert report == {"filesStaged": "4", "filesTotal": "4", "bytesStaged": str(total), "bytesTotal": str(total),
                      "lastError": "", "state": "Complete", "commit": commit}
    # A second run finds it staged and fetches nothing.
    fetched = len(hub.requests)
    assert stage(hub, cache).returncode == 0
    assert [r for r in hub.requests[fetched:] if "/resolve/" in r[1]] == []


def test_a_commit_revision_resolves_by_itself(hub, tmp_path):
    cache = tmp_path / "cache"
    commit = hub.repos[REPO_ID].commit
    assert stage(hub, cache, REPO_ID, commit).returncode == 0
    assert resolve_offline(cache, revision=commit) == FILES


def test_killed_halfway_and_started_again_resumes_with_identical_files(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.fault(BIG, "hold")
    process = subprocess.Popen(stage_command(hub, cache), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=clean_env())
    try:
        assert hub.held.wait(timeout=RUN_TIMEOUT), "the stand-in never sent half the file"
        # The held file's own partial blob: the other files finish (and their partial blobs go) meanwhile.
        blob = hashlib.sha256(FILES[BIG]).hexdigest()
        partial = cache / "models--acme--tiny-model" / "blobs" / f"{blob}.incomplete"
        deadline = time.monotonic() + RUN_TIMEOUT
        while (not partial.exists() or partial.stat().st_size < (1 << 20)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert partial.exists() and partial.stat().st_size >= 1 << 20, "nothing written before the kill"
        assert not resolves(cache), "a half-staged cache must not resolve"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=RUN_TIMEOUT)
    finally:
        process.kill()
        hub.release()
    on_disk = partial.stat().st_size

    done = stage(hub, cache)
    assert done.returncode == 0, done.stderr
    ranges = hub.ranges(BIG)
    assert ranges[0] is None and ranges[-1] == f"bytes={on_disk}-", ranges
    assert resolve_offline(cache) == FILES


def test_a_blob_with_the_wrong_sha256_is_refused_and_fetched_again(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.fault(BIG, "corrupt")
    done = stage(hub, cache)
    assert done.returncode == 0, done.stderr
    assert hub.ranges(BIG) == [None, None], "the bad bytes are removed, not resumed from"
    assert resolve_offline(cache) == FILES


def test_bad_bytes_every_time_fail_naming_the_file_and_nothing_resolves(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.fault(BIG, *["corrupt"] * 4)
    done = stage(hub, cache)
    assert done.returncode == 1, done.stderr
    report = progress(cache)
    assert report["state"] == "Failed"
    assert BIG in report["lastError"] and "SHA-256" in report["lastError"]
    assert "does not match" in report["lastError"] and "after 4 attempts" in report["lastError"]
    assert not resolves(cache)
    assert not (cache / "models--acme--tiny-model" / "snapshots").exists()


@pytest.mark.parametrize("faults", [("429", "429"), ("500", "503"), ("cut", "cut")])
def test_throttling_server_errors_and_cuts_are_retried(hub, tmp_path, faults):
    cache = tmp_path / "cache"
    hub.fault(hub_standin.LISTING, "429" if faults[0] == "cut" else faults[0])
    hub.fault(BIG, *faults)
    done = stage(hub, cache)
    assert done.returncode == 0, done.stderr
    assert len(hub.ranges(BIG)) == 3
    assert resolve_offline(cache) == FILES
    if faults[0] == "cut":
        assert hub.ranges(BIG)[1].startswith("bytes="), "a cut file resumes"


def test_a_gated_repo_without_a_token_fails_at_once_naming_repo_and_answer(hub, tmp_path):
    cache = tmp_path / "cache"
    done = stage(hub, cache, "acme/gated")
    assert done.returncode == 3, done.stderr
    error = progress(cache)["lastError"]
    assert "acme/gated" in error and "401" in error and "spec.huggingFace.authSecret" in error
    assert len([r for r in hub.requests if r[1].startswith("/api/")]) == 1, "401 is not retried"


def test_a_gated_repo_with_its_token_stages(hub, tmp_path):
    cache = tmp_path / "cache"
    done = stage(hub, cache, "acme/gated", env=clean_env(HF_TOKEN="hf_secret"))
    assert done.returncode == 0, done.stderr
    assert resolve_offline(cache, "acme/gated") == FILES


@pytest.mark.parametrize("repo,revision,names", [
    ("acme/absent", "main", ("acme/absent", "spec.huggingFace.authSecret")),
    (REPO_ID, "no-such-branch", ("no-such-branch", "404", "RevisionNotFound", "spec.huggingFace.revision")),
    ("not a repo", "main", ("spec.huggingFace.repo",)),
    (REPO_ID, "../../etc", ("spec.huggingFace.revision",)),
])
def test_what_does_not_exist_fails_at_once_naming_it(hub, tmp_path, repo, revision, names):
    cache = tmp_path / "cache"
    done = stage(hub, cache, repo, revision)
    assert done.returncode == 3, done.stderr
    error = progress(cache)["lastError"]
    for name in names:
        assert name in error, error
    assert len([r for r in hub.requests if r[1].startswith("/api/")]) <= 1


def test_a_file_gone_from_the_commit_fails_naming_it(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.fault("config.json", "404")
    done = stage(hub, cache)
    assert done.returncode == 3, done.stderr
    error = progress(cache)["lastError"]
    assert REPO_ID in error and "file config.json" in error and "404" in error
    assert len(hub.ranges("config.json")) == 1
    assert not resolves(cache)


def test_the_hub_is_reached_through_the_proxy_settings(hub, tmp_path):
    cache = tmp_path / "cache"
    # The endpoint's host does not resolve: only the proxy (the stand-in, answering absolute-form requests) can.
    command = stage_command(hub, cache)
    command[command.index("--endpoint") + 1] = "http://hub.invalid"
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env=clean_env(HTTP_PROXY=hub.endpoint))
    assert done.returncode == 0, done.stderr
    assert resolve_offline(cache) == FILES


def test_a_full_volume_fails_at_once_saying_so(hub, tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.fail("needs root and unshare(1) to mount a small volume in a mount namespace of its own")
    cache = tmp_path / "cache"
    cache.mkdir()
    # A 4 MiB volume for an 11 MiB snapshot, mounted in a namespace of the run's own: gone when it ends.
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=4m tmpfs "$0" && exec "$@"', str(cache), *stage_command(hub, cache)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=clean_env())
    assert done.returncode == 3, done.stderr
    error = progress(cache)["lastError"]
    assert "the volume is full" in error and "spec.huggingFace.sizeGiB" in error and REPO_ID in error, error
    assert "file model-0000" in error, error
