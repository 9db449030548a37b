"""Crossplane packages built and served as a user builds and serves them, for test_install.py.

- `modelplane-package build` writes each package's YAML stream; the real Crossplane CLI (`crossplane xpkg build`,
  upstream's cmd/crank, built by controlplane.sh as `crank`) makes the xpkg, embedding a runtime image that
  images.py builds from our binaries by the recipe the final stage of package/<name>/Dockerfile states, read
  from it (dockerfile_recipe: the binary's path, USER, ENTRYPOINT; package/README.md, "Runtime images").
- provider-kubernetes is built from its pinned module (tests/controlplane/modules/provider-kubernetes): the
  package root the module ships (its crossplane.yaml and CRDs) and the binary controlplane.sh built from it.
- Every other dependency of the Configuration is a STAND-IN: a Provider package under the dependency's own name
  and a release its range admits, carrying the vendored CRDs of tests/crds (verbatim) and no runtime of its
  own. stand_ins() lists them; the tests name them as such.
- `crossplane xpkg push` puts everything into `registry` (go-containerregistry's, plain HTTP, which
  go-containerregistry falls back to for loopback and private addresses; test_install.py serves it on the first
  real node's bridge address) under the registry's path of the package's real name: the registry host is replaced
  by the test one, and Crossplane's ImageConfigs rewrite the prefixes back (PREFIXES).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import yaml

import images
from installs import built_component
from kube import REPO_ROOT, crds_dir

# A `crossplane xpkg build` or `push` of a package of some MB; anything near this is a hang.
CLI_TIMEOUT_SECONDS = 300
REGISTRY_START_SECONDS = 30

# Each registry a package of ours or a dependency comes from, rewritten to the loopback registry's path.
PREFIXES = {
    "ghcr.io/modelplaneai": "modelplaneai",
    "xpkg.crossplane.io/crossplane-contrib": "crossplane-contrib",
    "xpkg.upbound.io/upbound": "upbound",
}

VERSION = "v" + images._function_version()
CONFIGURATION = "ghcr.io/modelplaneai/modelplane"
FUNCTION = images.FUNCTION_REPOSITORY
PROVIDER_EKS = "ghcr.io/modelplaneai/provider-eks"
PROVIDER_KUBERNETES = "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes"


@dataclasses.dataclass(frozen=True)
class StandIn:
    """A stand-in Provider package: `package` at `version`, carrying these vendored CRD files (relative to
    tests/crds), depending on `depends_on` (packages of this list) as the real one does."""
    package: str
    version: str
    crds: tuple[str, ...]
    depends_on: tuple[str, ...] = ()


def _gcp(group: str) -> tuple[str, ...]:
    return tuple(f"provider-upjet-gcp/{p.name}" for p in sorted((crds_dir() / "provider-upjet-gcp").glob(f"{group}.*")))


def _files(directory: str, prefix: str = "") -> tuple[str, ...]:
    return tuple(f"{directory}/{p.name}" for p in sorted((crds_dir() / directory).glob(f"{prefix}*.yaml")))


def stand_ins() -> list[StandIn]:
    """The Configuration's dependencies this machine cannot build, at the releases whose CRDs tests/crds vendors
    (each folder's SOURCES.md), and the family providers upjet's service providers depend on."""
    family_gcp = "xpkg.upbound.io/upbound/provider-family-gcp"
    family_azure = "xpkg.upbound.io/upbound/provider-family-azure"
    azure = "provider-upjet-azure"
    return [
        StandIn("xpkg.crossplane.io/crossplane-contrib/provider-helm", "v1.4.0", _files("provider-helm")),
        StandIn(family_gcp, "v2.6.0", _gcp("gcp")),
        StandIn("xpkg.upbound.io/upbound/provider-gcp-container", "v2.6.0", _gcp("container"), (family_gcp,)),
        StandIn("xpkg.upbound.io/upbound/provider-gcp-compute", "v2.6.0", _gcp("compute"), (family_gcp,)),
        StandIn("xpkg.upbound.io/upbound/provider-gcp-cloudplatform", "v2.6.0", _gcp("cloudplatform"), (family_gcp,)),
        StandIn(family_azure, "v2.7.0", _files(azure, "azure.")),
        StandIn("xpkg.upbound.io/upbound/provider-azure-network", "v2.7.0", _files(azure, "network."), (family_azure,)),
        StandIn("xpkg.upbound.io/upbound/provider-azure-managedidentity", "v2.7.0", _files(azure, "managedidentity."),
                (family_azure,)),
        StandIn("xpkg.upbound.io/upbound/provider-azure-authorization", "v2.7.0", _files(azure, "authorization."),
                (family_azure,)),
        StandIn("xpkg.upbound.io/upbound/provider-azure-containerservice", "v2.7.0",
                _files(azure, "containerservice."), (family_azure,)),
        StandIn("xpkg.upbound.io/upbound/provider-vultr", "v1.0.0", _files("provider-upjet-vultr")),
        StandIn("xpkg.upbound.io/upbound/provider-nebius", "v1.0.1", _files("provider-upjet-nebius")),
    ]


def object_name(package: str) -> str:
    """The name Crossplane gives the package object it installs as a dependency: the path without the registry
    host, `/` as `-` (package/README.md, "The function's name")."""
    return package.split("/", 1)[1].replace("/", "-")


def loopback_path(package: str) -> str:
    """`package` in the loopback registry, without the registry's address."""
    for prefix, path in PREFIXES.items():
        if package.startswith(prefix + "/"):
            return path + package[len(prefix):]
    raise ValueError(f"{package}: no loopback prefix for its registry")


class Registry:
    """The test registry (controlplane.sh's `registry`), recorded in CONTROLPLANE_PIDS so that the harness's
    `down` stops it even if the tests do not."""

    def __init__(self, work: Path, host: str = "127.0.0.1"):
        """Listens on `host` (loopback by default; test_install.py gives the first real node's bridge address, which
        pods and the nodes' containerd reach too), on a port the kernel picks."""
        binary = built_component("registry")
        address_file = work / "registry.address"
        self.log = Path(os.environ["CONTROLPLANE_STATE"]) / "registry.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([str(binary), "--address", f"{host}:0", "--blobs",
                                             str(work / "registry-blobs"), "--address-file", str(address_file)],
                                            stdout=log, stderr=subprocess.STDOUT)
        with open(os.environ["CONTROLPLANE_PIDS"], "a") as pids:
            pids.write(f"registry {self.process.pid} {binary}\n")
        deadline = time.monotonic() + REGISTRY_START_SECONDS
        while not (address_file.is_file() and address_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the registry did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        self.address = address_file.read_text().strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


class Cli:
    """The Crossplane CLI (`crossplane xpkg ...`), run in `work` with a Docker config of its own (empty: the
    loopback registry asks for no credentials)."""

    def __init__(self, work: Path):
        self.binary = built_component("crank")
        self.work = work
        (work / "docker-config").mkdir(exist_ok=True)

    def run(self, *args: str) -> str:
        done = subprocess.run([str(self.binary), *args], cwd=self.work, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_SECONDS,
                              env=os.environ | {"DOCKER_CONFIG": str(self.work / "docker-config")})
        if done.returncode != 0:
            raise AssertionError(f"crossplane {' '.join(args)} failed ({done.returncode}):\n{done.stderr}{done.stdout}")
        return done.stdout + done.stderr

    def build(self, root: Path, out: Path, runtime: Path | None = None) -> Path:
        """`crossplane xpkg build` of the package root `root` into `out`, embedding the runtime image tarball."""
        args = ["xpkg", "build", f"--package-root={root}", f"--package-file={out}",
                f"--examples-root={self.work / 'no-examples'}"]
        if runtime:
            args.append(f"--embed-runtime-image-tarball={runtime}")
        self.run(*args)
        return out

    def push(self, xpkg: Path, reference: str) -> None:
        self.run("xpkg", "push", "--package-files", str(xpkg), reference)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What the final stage of a package's Dockerfile puts in its runtime image: the binary's path, the user and
    the entrypoint (its base image, distroless/static, adds only CA certificates and /etc/passwd)."""
    binary: str
    user: str
    entrypoint: list[str]


def dockerfile_recipe(dockerfile: Path) -> Recipe:
    """The recipe of the last stage of `dockerfile`: one `COPY --from=build SRC DEST`, `USER` and an exec-form
    `ENTRYPOINT`. Anything else in that stage fails here, so the Dockerfile and the image the tests build from it
    cannot drift apart unnoticed."""
    stage = dockerfile.read_text().split("\nFROM ")[-1].splitlines()[1:]
    copy, user, entrypoint = None, None, None
    for line in (ln.strip() for ln in stage):
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word == "COPY" and rest.startswith("--from=build ") and copy is None:
            copy = rest.split()[-1]
        elif word == "USER" and user is None:
            user = rest.strip()
        elif word == "ENTRYPOINT" and entrypoint is None:
            entrypoint = yaml.safe_load(rest)
        elif word != "EXPOSE":
            raise ValueError(f"{dockerfile}: the runtime stage has `{line}`, which the test images do not build")
    if not (copy and user and isinstance(entrypoint, list)):
        raise ValueError(f"{dockerfile}: the runtime stage needs COPY --from=build, USER and ENTRYPOINT [...]")
    return Recipe(copy, user, entrypoint)


def _runtime(package: str, binary: Path, out: Path, labels: dict[str, str] | None = None,
             arguments: tuple[str, ...] = ()) -> Path:
    """The runtime image of package/<package>/Dockerfile, from `binary` (with the libraries it loads), with
    `labels` and `arguments` after the recipe's entrypoint."""
    recipe = dockerfile_recipe(REPO_ROOT / "package" / package / "Dockerfile")
    return images.build_image(f"modelplane.test/{package}-runtime:local",
                              images.with_libraries(recipe.binary, binary),
                              entrypoint=recipe.entrypoint + list(arguments), user=recipe.user, labels=labels,
                              out=out, docker_save=True)


def _provider_kubernetes_runtime(binary: Path, out: Path) -> Path:
    """provider-kubernetes' runtime image as its module's cluster/images/provider-kubernetes/Dockerfile makes it:
    the binary at /usr/local/bin/crossplane-kubernetes-provider, user 65532, no arguments."""
    dest = "/usr/local/bin/crossplane-kubernetes-provider"
    return images.build_image("modelplane.test/provider-kubernetes-runtime:local", images.with_libraries(dest, binary),
                              entrypoint=[dest], user="65532", out=out, docker_save=True)


def stand_in_root(stand_in: StandIn, root: Path) -> Path:
    """The package root of a stand-in: its meta object (named and marked as a stand-in, SafeStart as the real
    providers declare) and its vendored CRDs, verbatim."""
    root.mkdir(parents=True, exist_ok=True)
    meta = {
        "apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider",
        "metadata": {"name": stand_in.package.rsplit("/", 1)[1],
                     "annotations": {"meta.crossplane.io/description":
                                     "STAND-IN for the install tests: this release's vendored CRDs, no controller."}},
        "spec": {"capabilities": ["SafeStart"],
                 "dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "package": dep,
                                "version": f">={stand_in.version}"} for dep in stand_in.depends_on]},
    }
    (root / "crossplane.yaml").write_text(yaml.safe_dump(meta))
    for crd in stand_in.crds:
        (root / Path(crd).name).write_bytes((crds_dir() / crd).read_bytes())
    return root


def provider_kubernetes_module() -> tuple[Path, str]:
    """provider-kubernetes' own package root (crossplane.yaml, crds/) and release, as its pinned module has them."""
    module = "github.com/crossplane-contrib/provider-kubernetes"
    listing = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", module],
                             cwd=REPO_ROOT / "tests" / "controlplane" / "modules" / "provider-kubernetes",
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, f"go list provider-kubernetes: {listing.stderr}"
    directory, version = listing.stdout.split()
    return Path(directory) / "package", version


def build_and_push(work: Path, registry: Registry, function_bin: Path, package_bin: Path) -> dict[str, str]:
    """Builds every package (ours, provider-kubernetes', the stand-ins) and pushes each to `registry`; returns
    package name -> the tag pushed."""
    cli = Cli(work)
    built = work / "packages"
    done = subprocess.run([str(package_bin), "build", "--out", str(built)], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, f"modelplane-package build failed:\n{done.stderr}"
    provider_eks_bin = function_bin.parent / "modelplane-provider-eks"
    assert provider_eks_bin.is_file(), f"no provider-eks binary next to the function's: {provider_eks_bin}"
    (work / "xpkgs").mkdir(exist_ok=True)
    provider_kubernetes_root, provider_kubernetes_version = provider_kubernetes_module()
    plan = [
        (CONFIGURATION, VERSION, built / "configuration", None),
        (FUNCTION, VERSION, built / "function", _runtime("function", function_bin, work / "function-runtime.tar")),
        (PROVIDER_EKS, VERSION, built / "provider-eks",
         _runtime("provider-eks", provider_eks_bin, work / "provider-eks-runtime.tar")),
        (PROVIDER_KUBERNETES, provider_kubernetes_version, provider_kubernetes_root,
         _provider_kubernetes_runtime(built_component("provider-kubernetes"),
                                      work / "provider-kubernetes-runtime.tar")),
    ]
    for stand_in in stand_ins():
        plan.append((stand_in.package, stand_in.version,
                     stand_in_root(stand_in, work / "stand-ins" / object_name(stand_in.package)), None))
    pushed = {}
    for package, version, root, runtime in plan:
        _build_and_push(cli, registry, package, version, root, runtime)
        pushed[package] = version
    return pushed


def _build_and_push(cli: Cli, registry: Registry, package: str, version: str, root: Path,
                    runtime: Path | None) -> None:
    xpkg = cli.build(root, cli.work / "xpkgs" / f"{object_name(package)}-{version}.xpkg", runtime)
    cli.push(xpkg, f"{registry.address}/{loopback_path(package)}:{version}")


# The label a release build puts on each runtime image (OCI's annotation key, as `docker build --label` sets it).
VERSION_LABEL = "org.opencontainers.image.version"


def push_function(cli: Cli, registry: Registry, function_bin: Path, version: str,
                  arguments: tuple[str, ...] = ()) -> str:
    """Another release of the Function package, after build_and_push: the same package root and binary, its
    runtime image labelled with `version` (so the package, its revision and its pod are not the first release's,
    while the binary's layer is the one the node already holds), `arguments` after the recipe's entrypoint.
    Returns the package's reference."""
    runtime = _runtime("function", function_bin, cli.work / f"function-runtime-{version}.tar",
                       {VERSION_LABEL: version}, arguments)
    _build_and_push(cli, registry, FUNCTION, version, cli.work / "packages" / "function", runtime)
    return f"{FUNCTION}:{version}"


def push_configuration(cli: Cli, registry: Registry, version: str, function_range: str) -> str:
    """Another release of the Configuration, after build_and_push: the same XRDs and Compositions, depending on the
    Function releases `function_range` admits. Returns the package's reference."""
    meta, *rest = yaml.safe_load_all((cli.work / "packages" / "configuration" / "package.yaml").read_text())
    [dependency] = [d for d in meta["spec"]["dependsOn"] if d.get("package") == FUNCTION]
    dependency["version"] = function_range
    root = cli.work / "packages" / f"configuration-{version}"
    root.mkdir(exist_ok=True)
    (root / "package.yaml").write_text(yaml.safe_dump_all([meta, *rest]))
    _build_and_push(cli, registry, CONFIGURATION, version, root, None)
    return f"{CONFIGURATION}:{version}"
