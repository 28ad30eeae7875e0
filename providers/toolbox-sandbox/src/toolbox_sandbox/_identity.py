"""Who the sandbox runs as on the host: a fresh unprivileged user per run when toolbox runs as root.

As root in the initial user namespace, each run gets a random user and group id
from a range no account uses, so the code runs as nobody the host knows: it
cannot signal, trace or read the files of any other process, even of another
sandbox, should it ever leave its namespaces. Otherwise the sandbox runs as the
process's own user (the namespaces still separate it).
"""

from __future__ import annotations

import functools
import os
import secrets

__all__ = ["FIRST_ID", "ID_COUNT", "run_identity"]

FIRST_ID = 0x5000_0000
"""The first id of the range (1,342,177,280), far above the ids accounts use."""
ID_COUNT = 0x1000_0000
"""How many ids the range holds."""


@functools.cache
def _initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map", encoding="ascii") as mapping:
            return mapping.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def run_identity() -> tuple[int, int] | None:
    """A fresh ``(uid, gid)`` for one run when this process is root on the host, else None."""
    if os.geteuid() != 0 or not _initial_user_namespace():
        return None
    uid = FIRST_ID + secrets.randbelow(ID_COUNT)
    return uid, uid
