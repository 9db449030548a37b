"""The harness's own processes as a test sees them, and faults made to them.

`controlplane.sh` records each process it starts as `NAME PID BINARY` in `$CONTROLPLANE_PIDS`, and `down` stops
what that file names. Here a recorded process is read back from /proc (its command line, environment, working
directory and log) so that it can be killed with SIGKILL, as a crash or an OOM kill would end it, and started again
exactly as it was: the same arguments, so the same ports (Crossplane dials the function at the endpoint its
FunctionRevision records; every client of kube-apiserver and etcd knows one address), the same data directory for
etcd, the same log appended to. The new PID replaces the old one in the PID file, in its place, so `down` still
stops it, last started first.

Also read here: what a process has cost (CPU seconds and peak resident memory, from /proc, summed or maximised over
its lifetimes across restarts) and Crossplane's metrics, whose counters start again at each restart.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from kube import Kube, wait_for
from ports import free_port

# How long a restarted component may take to answer its readiness check. Longer than the harness's own start
# bound: a kube-apiserver restarted under a fleet of thousands of objects on a loaded machine took over two minutes
# to pass its post-start hooks, and a benchmark should measure that, not fail on it.
READY_SECONDS = 300
# How long a killed process may take to be gone (its sockets closed) after SIGKILL.
GONE_SECONDS = 30
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# Processes this module started, by PID: they are our children, reaped here when they are killed in turn.
_started: dict[int, subprocess.Popen] = {}


def pids_file() -> Path:
    return Path(os.environ["CONTROLPLANE_PIDS"])


def recorded_pid(name: str) -> int:
    """The PID the harness's PID file records for `name` (the last record, should there be several)."""
    found = [int(line.split()[1]) for line in pids_file().read_text().splitlines()
             if line.split() and line.split()[0] == name]
    assert found, f"no process named {name} in {pids_file()}"
    return found[-1]


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def option(args: list[str], name: str) -> str:
    """The value of `--name VALUE` or `--name=VALUE` in a command line."""
    for i, arg in enumerate(args):
        if arg == name:
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    raise AssertionError(f"{name} is not among {args[0]}'s arguments")


def record(name: str, pid: int, binary: str) -> None:
    """Adds a process to the PID file, as the harness's `start` does."""
    with open(pids_file(), "a") as pids:
        pids.write(f"{name} {pid} {binary}\n")


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a killed process of the harness is reaped by init in its own
    time; once a zombie it holds no socket)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclasses.dataclass(frozen=True)
class Launch:
    """How a process was started, as /proc tells it."""
    args: list[str]
    env: dict[str, str]
    cwd: str
    log: str

    @classmethod
    def of(cls, pid: int) -> "Launch":
        env = dict(entry.split("=", 1) for entry in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
                   if "=" in entry)
        return cls(command_line(pid), env, os.readlink(f"/proc/{pid}/cwd"), os.readlink(f"/proc/{pid}/fd/1"))


@dataclasses.dataclass
class Usage:
    """CPU seconds and peak resident memory of one named process over all its lifetimes."""
    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0

    def add_lifetime(self, pid: int, since: "Usage | None" = None) -> None:
        """Adds what `pid` has used so far (less `since`, what it had used when counting began)."""
        cpu, peak = usage_of(pid)
        self.cpu_seconds += cpu - (since.cpu_seconds if since else 0.0)
        self.peak_rss_bytes = max(self.peak_rss_bytes, peak)


def usage_of(pid: int) -> tuple[float, int]:
    """(user + system CPU seconds, VmHWM in bytes) of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15 of stat
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def ready_check(name: str, args: list[str]) -> callable:
    """Whether the restarted `name` answers as the harness's own start waits for it to."""
    state = Path(os.environ["CONTROLPLANE_STATE"])

    def get(url: str, **kwargs) -> requests.Response | None:
        try:
            return requests.get(url, timeout=5, **kwargs)
        except requests.RequestException:
            return None

    if name == "etcd":
        url = option(args, "--listen-client-urls").split(",")[0]
        return lambda: (r := get(url + "/health")) is not None and '"health":"true"' in r.text
    if name == "kube-apiserver":
        kube = Kube(f"https://127.0.0.1:{option(args, '--secure-port')}", state / "pki" / "ca.crt",
                    state / "pki" / "admin.crt", state / "pki" / "admin.key")

        def api_ready() -> bool:
            try:
                return kube.session.get(kube.server + "/readyz", timeout=5).ok
            except requests.RequestException:
                return False
        return api_ready
    if name == "crossplane":
        port = option(args, "--health-probe-port")
        return lambda: (r := get(f"http://127.0.0.1:{port}/readyz")) is not None and r.ok
    if name == "modelplane-function":
        host, _, port = option(args, "--address").rpartition(":")

        def listening() -> bool:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                return True
            except OSError:
                return False
        return listening
    if name == "provider-kubernetes":
        address = option(args, "--health-probe-bind-addr")
        return lambda: (r := get(f"http://{address}/readyz")) is not None and r.ok
    raise AssertionError(f"no readiness check for {name}")


class Recorded:
    """One process the harness recorded, killed and started again in place; `usage` counts its CPU and memory over
    every lifetime from the moment this object was made."""

    def __init__(self, name: str):
        self.name = name
        self.pid = recorded_pid(name)
        self.launch = Launch.of(self.pid)
        self.pids_seen = [self.pid]
        self.usage = Usage()
        cpu, _ = usage_of(self.pid)
        self._baseline = Usage(cpu_seconds=cpu)
        self.ready = ready_check(name, self.launch.args)

    def restart(self, before_kill=None, *extra: str) -> int:
        """SIGKILLs the process and starts it again as it was (with `extra` arguments appended); returns the new PID
        once it is ready. `before_kill` runs just before the signal (to read what only the living process can
        tell)."""
        self.kill(before_kill)
        return self.start(*extra)

    def kill(self, before_kill=None) -> None:
        """SIGKILLs the process, as a crash or an OOM kill ends it, and waits until it is gone; `start` brings it
        back."""
        old = self.pid
        self.usage.add_lifetime(old, self._baseline)
        self._baseline = None
        if before_kill:
            before_kill()
        os.kill(old, signal.SIGKILL)
        if old in _started:
            _started.pop(old).wait(timeout=GONE_SECONDS)
        wait_for(f"{self.name} (pid {old}) gone after SIGKILL", lambda: not running(old), GONE_SECONDS)

    def start(self, *extra: str) -> int:
        """Starts the killed process again as it was, with `extra` arguments appended; returns the new PID once it
        is ready. A port the dead process held may linger a moment for the new one (kube-apiserver found its port
        in use once): a start that exits is tried again."""
        assert not running(self.pid), f"{self.name} (pid {self.pid}) still runs: kill it first"
        killed = old = self.pid
        for attempt in range(3):
            with open(self.launch.log, "ab") as log:
                log.write(f"--- started by faults.py after SIGKILL of pid {killed} (attempt {attempt + 1}) ---\n"
                          .encode())
                log.flush()
                process = subprocess.Popen(self.launch.args + list(extra), env=self.launch.env, cwd=self.launch.cwd,
                                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            _started[process.pid] = process
            self._replace_record(old, process.pid)
            old = process.pid

            deadline = time.monotonic() + READY_SECONDS
            while process.poll() is None and time.monotonic() < deadline and not self.ready():
                time.sleep(0.2)
            if process.poll() is None and self.ready():
                self.pid = process.pid
                self.pids_seen.append(process.pid)
                return process.pid
            if process.poll() is None:
                break
            _started.pop(process.pid, None)
            time.sleep(1 + attempt)
        pytest.fail(f"{self.name} did not come back after SIGKILL (its log: {self.launch.log})")

    def _replace_record(self, old: int, new: int) -> None:
        """Puts `new` in place of `old` in the PID file (keeping its order: `down` stops the last started first)."""
        lines = pids_file().read_text().splitlines()
        replaced = [f"{self.name} {new} {self.launch.args[0]}" if line.split()[:2] == [self.name, str(old)] else line
                    for line in lines]
        assert replaced != lines, f"{self.name} (pid {old}) is not in {pids_file()}"
        temporary = pids_file().with_suffix(".new")
        temporary.write_text("\n".join(replaced) + "\n")
        temporary.replace(pids_file())

    def finish(self) -> Usage:
        """Adds the running lifetime to `usage` and returns it."""
        if running(self.pid):
            self.usage.add_lifetime(self.pid, self._baseline)
            self._baseline = Usage(*usage_of(self.pid))
        return dataclasses.replace(self.usage)


class CrossplaneMetrics:
    """Crossplane's counters of RunFunction calls, summed across its restarts: read before each kill (its
    `before_kill`) and at the end. Counting starts when this object is made."""

    def __init__(self, crossplane: Recorded):
        self.crossplane = crossplane
        self.done: dict[str, float] = {}
        self.baseline = self.read()

    def read(self) -> dict[str, float]:
        """The live process's totals: requests sent, and responses by gRPC code."""
        port = option(self.crossplane.launch.args, "--metrics-port")
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        totals: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("function_run_function_request_total"):
                totals["requests"] = totals.get("requests", 0.0) + float(line.rsplit(" ", 1)[1])
            elif line.startswith("function_run_function_response_total"):
                code = line.partition('grpc_code="')[2].partition('"')[0]
                key = f"responses {code}"
                totals[key] = totals.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
        return totals

    def bank(self) -> None:
        """Adds the live process's counters since counting began to the total (before it is killed)."""
        for key, value in self.read().items():
            self.done[key] = self.done.get(key, 0.0) + value - self.baseline.get(key, 0.0)
        self.baseline = {}

    def totals(self) -> dict[str, float]:
        out = dict(self.done)
        for key, value in self.read().items():
            out[key] = out.get(key, 0.0) + value - self.baseline.get(key, 0.0)
        return out


class ProviderMetrics:
    """provider-kubernetes' namespaced Object controller, which applies and observes everything composed on a
    cluster: the reconciles it finished and the seconds they took since this object was made, and the deepest its
    work queue was seen (`sample`, called now and then). A provider that cannot keep up with its Objects' polls
    shows here first: the queue grows, and each Object waits longer for its turn."""

    CONTROLLER = 'controller="managed/object.kubernetes.m.crossplane.io"'

    def __init__(self, provider: Recorded):
        self.address = option(provider.launch.args, "--metrics-bind-address")
        self.peak_depth = 0.0
        self.baseline = self.read()

    def read(self) -> dict[str, float]:
        text = requests.get(f"http://{self.address}/metrics", timeout=10).text
        figures: dict[str, float] = {}
        for line in text.splitlines():
            if self.CONTROLLER not in line:
                continue
            value = float(line.rsplit(" ", 1)[1])
            for metric, key in (("controller_runtime_reconcile_time_seconds_sum{", "seconds"),
                                ("controller_runtime_reconcile_time_seconds_count{", "reconciles"),
                                ("workqueue_depth{", "depth")):
                if line.startswith(metric):
                    figures[key] = figures.get(key, 0.0) + value
        return figures

    def sample(self) -> None:
        try:
            self.peak_depth = max(self.peak_depth, self.read().get("depth", 0.0))
        except requests.RequestException:
            pass

    def totals(self) -> dict[str, float]:
        now = self.read()
        totals = {key: now.get(key, 0.0) - self.baseline.get(key, 0.0) for key in ("seconds", "reconciles")}
        totals["peak depth"] = max(self.peak_depth, now.get("depth", 0.0))
        return totals
