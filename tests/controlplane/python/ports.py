"""Loopback ports for the processes the tests start, handed out once per machine.

A process the fault tests kill gives its port back to the kernel until it is started again on it; anything else
binding an ephemeral port meanwhile (another test's server, a second control plane a developer or CI runs beside
this one) may be offered that very port, and the restart then fails. So every port the harness or a test hands out
is recorded in one file per machine, under a lock, and never handed out again. `controlplane.sh` keeps the same
file (its `free_port`).
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path


# The registry keeps its newest KEEP entries once it holds more than KEEP_MAX (controlplane.sh does the same).
KEEP, KEEP_MAX = 2000, 5000


def registry() -> Path:
    return Path(os.environ.get("MODELPLANE_PORTS_FILE", "/tmp/modelplane-controlplane.ports"))


def free_port() -> int:
    """A loopback port nothing listens on, never handed out before on this machine."""
    with open(registry(), "a+") as handed_out:
        fcntl.flock(handed_out, fcntl.LOCK_EX)
        handed_out.seek(0)
        taken = set(handed_out.read().split())
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if str(port) not in taken:
                break
        handed_out.write(f"{port}\n")
        if len(taken) > KEEP_MAX:
            # Bounded: the newest entries cover every control plane still running here.
            newest = (handed_out.seek(0) or handed_out.read()).split()[-KEEP:]
            handed_out.seek(0)
            handed_out.truncate()
            handed_out.write("".join(f"{p}\n" for p in newest))
        return port
