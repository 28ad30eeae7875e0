"""`probe`: what this machine offers the sandbox, and what is missing, in words an operator can act on."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import final

from toolbox_sandbox._identity import run_identity
from toolbox_sandbox._seccomp import supported

__all__ = ["SandboxSupport", "probe"]

_CGROUP_ROOT = "/sys/fs/cgroup"


@final
@dataclass(frozen=True)
class SandboxSupport:
    """The probe's findings. ``missing`` is empty when sandboxes can run here."""

    bwrap: str | None
    """bubblewrap's version line, or None when it is not installed."""
    namespaces: bool
    """Whether bubblewrap built a sandbox with every namespace (user, mount, PID, IPC, UTS, net)."""
    seccomp: bool
    """Whether a seccomp filter exists for this architecture (x86-64)."""
    fresh_user: bool
    """Whether each run gets its own host user (toolbox runs as root in the initial user namespace)."""
    cgroups: str
    """Why limits use rlimits and the supervisor rather than cgroups v2 (see docs/sandbox.md)."""
    missing: tuple[str, ...]
    """What prevents sandboxes here, each with what to do."""


def _cgroups() -> str:
    controllers = os.path.join(_CGROUP_ROOT, "cgroup.controllers")
    if not os.path.exists(controllers):
        return "no cgroup v2 hierarchy at /sys/fs/cgroup (cgroups v1 or a hybrid layout): rlimits apply"
    return "cgroup v2 found; toolbox-sandbox applies rlimits and the supervisor's limits (docs/sandbox.md)"


def probe(bwrap: str = "/usr/bin/bwrap") -> SandboxSupport:
    """Run bubblewrap once with every namespace and report what works and what is missing."""
    missing: list[str] = []
    version: str | None = None
    namespaces = False
    if not os.access(bwrap, os.X_OK):
        missing.append(f"bubblewrap is not installed at {bwrap}: apt-get install bubblewrap (as root)")
    else:
        try:
            done = subprocess.run(  # noqa: S603 - the configured bubblewrap, asked its version
                [bwrap, "--version"], capture_output=True, env={}, timeout=30, check=False
            )
            version = done.stdout.decode("utf-8", "replace").strip() or None
            identity = run_identity()
            trial = subprocess.run(  # noqa: S603 - fixed argv
                [
                    bwrap,
                    "--unshare-all",
                    "--unshare-user",
                    "--disable-userns",
                    "--ro-bind",
                    "/usr",
                    "/usr",
                    "--symlink",
                    "usr/lib",
                    "/lib",
                    "--symlink",
                    "usr/lib64",
                    "/lib64",
                    "--symlink",
                    "usr/bin",
                    "/bin",
                    "--proc",
                    "/proc",
                    "--dev",
                    "/dev",
                    "--as-pid-1",
                    "/bin/true",
                ],
                capture_output=True,
                env={},
                timeout=30,
                check=False,
                user=None if identity is None else identity[0],
                group=None if identity is None else identity[1],
                extra_groups=None if identity is None else [],
            )
            namespaces = trial.returncode == 0
            if not namespaces:
                said = trial.stderr.decode("utf-8", "replace").strip().splitlines()
                missing.append(
                    "bubblewrap could not create user, mount, PID, IPC, UTS and network namespaces "
                    f"({said[-1] if said else 'no message'}): enable unprivileged user namespaces "
                    "(sysctl user.max_user_namespaces > 0; on Debian kernels also "
                    "kernel.unprivileged_userns_clone=1)"
                )
        except (OSError, subprocess.SubprocessError) as exc:
            missing.append(f"bubblewrap could not be run ({type(exc).__name__})")
    return SandboxSupport(
        bwrap=version,
        namespaces=namespaces,
        seccomp=supported(),
        fresh_user=run_identity() is not None,
        cgroups=_cgroups(),
        missing=tuple(missing),
    )
