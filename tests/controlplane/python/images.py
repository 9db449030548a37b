"""Container images built here from files, for the real nodes of the test control plane (controlplane.sh up
--kubelets). No image registry is reachable and no Docker daemon runs, so every image a pod runs is made by the
suite: one layer holding the given files, written as an OCI image tarball and imported into each node's containerd,
or embedded in a package by `crossplane xpkg build` (test_install.py, with `docker_save=True`).

Python API (the harness itself uses the command line below, with the system python3: standard library only):

    from images import build_image, load_image, busybox_files, with_libraries

    tarball = build_image("modelplane.test/engine:local",
                          {"/engine": Path("target/engine"), "/etc/engine.json": b"{}"},
                          entrypoint=["/engine"], env={"PORT": "8000"}, out=tmp_path / "engine.tar")
    load_image(tarball)            # into every real node's containerd (CONTROLPLANE_STATE, CONTROLPLANE_KUBELETS)

- `files` maps a path in the image to its source: a file on this machine (its mode is kept), `bytes` (a regular
  file, mode 0644), or `Symlink(target)`. Parent directories are made (0755); `/tmp` is always there (1777).
- A dynamically linked binary needs its libraries in the layer: `with_libraries("/bin/app", Path(...))` gives the
  binary and every library `ldd` lists (the loader too), at the paths the binary looks for them.
- `busybox_files()` is a shell image's files: Debian's static busybox with a link for each of its applets.
- Pods run such images with `imagePullPolicy: Never`, under a test-only registry name (`modelplane.test/...:local`),
  never a public tag: a missing image then fails the pod (ErrImageNeverPull) instead of reaching for a registry.

Command line: `python3 images.py build NAME OUT --entrypoint PATH [--file DEST=SRC]... [--busybox]` and
`python3 images.py load TARBALL SOCKET...`.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Mapping, Union

# containerd's namespace for images the kubelet (CRI) sees.
CRI_NAMESPACE = "k8s.io"
# An import of a large layer (the function's binary) takes seconds; anything near this is a hang.
IMPORT_TIMEOUT_SECONDS = 120
BUSYBOX = Path("/bin/busybox")

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclasses.dataclass(frozen=True)
class Symlink:
    target: str


FileSource = Union[str, Path, bytes, Symlink]


def _architecture() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _layer(files: Mapping[str, FileSource], out) -> None:
    """Writes the layer's tar to the file object `out`: reproducible (owner root, time 0, sorted)."""
    entries: dict[str, FileSource | None] = {"tmp": None}
    for dest, source in files.items():
        path = dest.strip("/")
        if not path or ".." in path.split("/"):
            raise ValueError(f"not a path inside the image: {dest!r}")
        parts = path.split("/")
        for i in range(1, len(parts)):
            entries.setdefault("/".join(parts[:i]), None)
        entries[path] = source
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            source = entries[path]
            info = tarfile.TarInfo(path)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
            if source is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if path == "tmp" else 0o755
                tar.addfile(info)
            elif isinstance(source, Symlink):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, source.target, 0o777
                tar.addfile(info)
            elif isinstance(source, bytes):
                info.size, info.mode = len(source), 0o644
                tar.addfile(info, io.BytesIO(source))
            else:
                src = Path(source)
                if not src.is_file():
                    raise FileNotFoundError(f"image file {path}: no file at {src}")
                info.size, info.mode = src.stat().st_size, src.stat().st_mode & 0o7777
                with src.open("rb") as f:
                    tar.addfile(info, f)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def build_image(name: str, files: Mapping[str, FileSource], *, entrypoint: list[str], out: Path,
                cmd: list[str] | None = None, env: Mapping[str, str] | None = None, workdir: str = "/",
                user: str | None = None, labels: Mapping[str, str] | None = None, docker_save: bool = False) -> Path:
    """Writes the OCI image tarball of a one-layer image `name` (`registry/repository:tag`) holding `files` to
    `out`, and returns `out`. `env` adds to a default PATH; `user` is the image's `USER` (uid[:gid]); `labels`
    its `LABEL`s.
    `docker_save` adds `docker save`'s manifest.json, as Docker 25 and later write both: `crossplane xpkg build
    --embed-runtime-image-tarball` reads that one (go-containerregistry's tarball package)."""
    if not re.fullmatch(r"[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+", name):
        raise ValueError(f"image name {name!r} is not registry/repository:tag")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin"} | dict(env or {})
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        blobs = Path(scratch) / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        layer_path = Path(scratch) / "layer.tar"
        with layer_path.open("wb") as f:
            _layer(files, f)
        layer_digest, layer_size = _digest(layer_path), layer_path.stat().st_size
        layer_path.rename(blobs / layer_digest.split(":")[1])

        def blob(document: dict) -> dict:
            data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            (blobs / digest.split(":")[1]).write_bytes(data)
            return {"digest": digest, "size": len(data)}

        config = blob({
            "architecture": _architecture(), "os": "linux",
            "config": {"Entrypoint": list(entrypoint), "Cmd": list(cmd or []),
                       "Env": [f"{k}={v}" for k, v in environment.items()], "WorkingDir": workdir}
                      | ({"User": user} if user else {}) | ({"Labels": dict(labels)} if labels else {}),
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": "tests/controlplane/python/images.py"}],
        })
        manifest = blob({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG} | config,
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": layer_size}],
        })
        index = {
            "schemaVersion": 2, "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": OCI_MANIFEST, **manifest,
                           "platform": {"architecture": _architecture(), "os": "linux"},
                           "annotations": {"io.containerd.image.name": name,
                                           "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}],
        }
        (Path(scratch) / "index.json").write_text(json.dumps(index))
        (Path(scratch) / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
        entries = ["oci-layout", "index.json", "blobs"]
        if docker_save:
            (Path(scratch) / "manifest.json").write_text(json.dumps([{
                "Config": "blobs/sha256/" + config["digest"].split(":")[1], "RepoTags": [name],
                "Layers": ["blobs/sha256/" + layer_digest.split(":")[1]]}]))
            entries.append("manifest.json")
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as tar:
            for entry in entries:
                tar.add(Path(scratch) / entry, arcname=entry)
        partial.rename(out)
    return out


def with_libraries(dest: str, binary: Path) -> dict[str, Path]:
    """`binary` at `dest`, and every shared library it loads (as `ldd` resolves them on this machine) at the path
    the loader finds it under."""
    files: dict[str, Path] = {dest: Path(binary)}
    listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    if listing.returncode != 0:
        if "not a dynamic executable" in listing.stdout + listing.stderr:
            return files
        raise RuntimeError(f"ldd {binary}: {listing.stderr.strip()}")
    for line in listing.stdout.splitlines():
        # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
        # "linux-vdso.so.1 (0x...)" (the kernel's: no file).
        match = re.match(r"\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)", line)
        if match:
            files[match.group(1)] = Path(os.path.realpath(match.group(1)))
        elif "not found" in line:
            raise RuntimeError(f"ldd {binary}: a library is missing: {line.strip()}")
    return files


def busybox_files(busybox: Path = BUSYBOX) -> dict[str, FileSource]:
    """Debian's static busybox (busybox-static) at /bin/busybox, and /bin/<applet> links for all its applets."""
    if not busybox.is_file():
        raise FileNotFoundError(f"no static busybox at {busybox} (Debian: apt-get install busybox-static)")
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()
    files: dict[str, FileSource] = {f"/bin/{applet}": Symlink("busybox") for applet in applets}
    files["/bin/busybox"] = busybox
    return files


def node_sockets() -> list[str]:
    """The containerd socket of every real node of the running control plane."""
    state, kubelets = os.environ.get("CONTROLPLANE_STATE"), os.environ.get("CONTROLPLANE_KUBELETS")
    if not state or not kubelets:
        raise RuntimeError("no real nodes: run under `controlplane.sh run --kubelets N`")
    return [str(Path(state) / node / "containerd.sock") for node in kubelets.split(",")]


def ctr_binary() -> str:
    """The harness's own ctr (built with the nodes' containerd, CONTROLPLANE_BIN), else one on PATH."""
    built = Path(os.environ.get("CONTROLPLANE_BIN", "")) / "ctr"
    if os.environ.get("CONTROLPLANE_BIN") and built.is_file():
        return str(built)
    found = shutil.which("ctr")
    if not found:
        raise RuntimeError("no ctr: build it (controlplane.sh build ctr) or put one on PATH")
    return found


def load_image(tarball: Path, sockets: list[str] | None = None) -> None:
    """Imports the image tarball into the containerd of every real node (or of each of `sockets`), where the
    kubelet finds it."""
    ctr = ctr_binary()
    for socket in sockets if sockets is not None else node_sockets():
        done = subprocess.run([ctr, "--address", socket, "--namespace", CRI_NAMESPACE, "images", "import",
                               str(tarball)], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {tarball} into {socket}: {done.stderr.strip()}")


# --- the images the tests run -----------------------------------------------------------------------------------

# vLLM's stand-in (tests/controlplane/modules/mock-engine) as vLLM's own image is laid out: `vllm` on PATH, a shell
# for the commands that use one, entrypoint `vllm serve` (vllm/vllm-openai's), so a composed engine pod runs its
# user's command or args unchanged.
MOCK_ENGINE_IMAGE = "modelplane.test/mock-vllm:local"
# The function's own image (package/function/Dockerfile): the binary at /usr/local/bin/modelplane-function, run as
# 2000 with no arguments, which is `serve` on 0.0.0.0:9443.
FUNCTION_IMAGE = "modelplane.test/function-modelplane:local"
FUNCTION_PATH = "/usr/local/bin/modelplane-function"


def _function_version() -> str:
    for line in (Path(__file__).resolve().parents[3] / "function" / "Cargo.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise RuntimeError("function/Cargo.toml names no version")


# The Function package's repository: its runtime image and its package are published there.
FUNCTION_REPOSITORY = "ghcr.io/modelplaneai/function-modelplane"
# The same image under the name the function composes for what each cluster runs from it (the pod reporter):
# function/src/workload/well_known.rs FUNCTION_IMAGE, the release this binary is.
FUNCTION_RELEASE_IMAGE = f"{FUNCTION_REPOSITORY}:v{_function_version()}"


def _built_binary(name: str) -> Path:
    """A binary controlplane.sh built (CONTROLPLANE_BIN)."""
    directory = os.environ.get("CONTROLPLANE_BIN")
    if not directory or not (Path(directory) / name).is_file():
        raise RuntimeError(f"no built {name}: run under controlplane.sh (CONTROLPLANE_BIN), after "
                           f"`controlplane.sh build {name}`")
    return Path(directory) / name


def mock_engine_image(out: Path, binary: Path | None = None) -> Path:
    """The mock engine's image tarball at `out`: busybox (/bin/sh) and the static mock engine as /usr/bin/vllm."""
    files = busybox_files()
    files["/usr/bin/vllm"] = Path(binary) if binary else _built_binary("mock-engine")
    return build_image(MOCK_ENGINE_IMAGE, files, entrypoint=["vllm", "serve"], out=out)


def function_image(binary: Path | str | None, out: Path, name: str = FUNCTION_IMAGE) -> Path:
    """The function's image tarball at `out`, named `name`: `binary` (else MODELPLANE_FUNCTION_BIN) with the
    libraries ldd lists, entrypoint the binary alone (`serve`), user 2000 as Crossplane runs functions."""
    binary = binary or os.environ.get("MODELPLANE_FUNCTION_BIN")
    if not binary or not Path(binary).is_file():
        raise RuntimeError("function_image: MODELPLANE_FUNCTION_BIN must name the built modelplane-function binary")
    return build_image(name, with_libraries(FUNCTION_PATH, Path(binary)), entrypoint=[FUNCTION_PATH],
                       out=out, user="2000:2000")


_loaded: dict[str, Path] = {}


def load_test_image(name: str, scratch: Path) -> str:
    """Builds the test image `name` (MOCK_ENGINE_IMAGE, FUNCTION_IMAGE or FUNCTION_RELEASE_IMAGE) into `scratch`
    and imports it into every real node's containerd, once a test session; returns `name` for the pod's `image`
    (pull policy Never, or the default for the release name, which the node then has)."""
    builders = {MOCK_ENGINE_IMAGE: lambda out: mock_engine_image(out),
                FUNCTION_IMAGE: lambda out: function_image(None, out),
                FUNCTION_RELEASE_IMAGE: lambda out: function_image(None, out, FUNCTION_RELEASE_IMAGE)}
    if name not in builders:
        raise ValueError(f"no test image {name!r} (known: {', '.join(builders)})")
    if name not in _loaded:
        tarball = builders[name](Path(scratch) / (name.split("/")[-1].replace(":", "-") + ".tar"))
        load_image(tarball)
        _loaded[name] = tarball
    return name


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="images.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="write an image tarball")
    build.add_argument("name")
    build.add_argument("out", type=Path)
    build.add_argument("--entrypoint", required=True, action="append", help="repeat for each argument")
    build.add_argument("--file", action="append", default=[], metavar="DEST=SRC")
    build.add_argument("--busybox", action="store_true", help="add busybox and its applets")
    load = commands.add_parser("load", help="import an image tarball into containerd")
    load.add_argument("tarball", type=Path)
    load.add_argument("sockets", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "build":
        files: dict[str, FileSource] = busybox_files() if args.busybox else {}
        for pair in args.file:
            dest, _, src = pair.partition("=")
            files[dest] = Path(src)
        build_image(args.name, files, entrypoint=args.entrypoint, out=args.out)
    else:
        load_image(args.tarball, args.sockets)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
        sys.exit(f"images.py: {error}")
