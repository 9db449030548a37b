"""Session fixtures for the tests that run against the real control plane (tests/controlplane/controlplane.sh)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import install_step
import installs
from kube import Kube, wait_for
from simulated_nodes import require_nodes


@pytest.fixture(scope="session")
def kube() -> Kube:
    client = Kube.from_env()
    wait_for("kube-apiserver /readyz", lambda: client.session.get(client.server + "/readyz", timeout=5).ok, 30)
    return client


@pytest.fixture(scope="session")
def platform(kube) -> Kube:
    """Every CRD the composed objects need, and our Configuration (its XRDs made into CRDs by Crossplane)."""
    installs.install_crds(kube)
    installs.install_configuration(kube)
    return kube


@pytest.fixture(scope="session")
def nodes(kube) -> Kube:
    """The control plane, with kube-scheduler and kwok running (`controlplane.sh up --nodes`)."""
    require_nodes()
    return kube


@pytest.fixture(scope="session")
def installed(kube, tmp_path_factory) -> Iterator[install_step.Installed]:
    """The install step's installation (install_step.py), made once for every file of the step (test_install.py,
    test_upgrade.py, then test_least_privilege.py, in one pytest invocation) and taken down after the last test.
    Only those files ask for it; it fails on a control plane that already runs the harness's Crossplane."""
    yield from install_step.install(kube, tmp_path_factory)
