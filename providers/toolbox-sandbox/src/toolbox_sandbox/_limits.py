"""`Limits`: what one sandboxed run may consume, and the names of the limits a run can hit."""

from __future__ import annotations

from typing import Annotated, Literal, final

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MIB", "Enforcement", "LimitName", "Limits"]

MIB = 1024 * 1024

_Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
_Count = Annotated[int, Field(strict=True, ge=1, le=65536)]
_Bytes = Annotated[int, Field(strict=True, ge=4096, le=64 * 1024 * MIB)]
# Output and exports are held in the supervisor's memory: bounded more tightly.
_HeldBytes = Annotated[int, Field(strict=True, ge=1024, le=256 * MIB)]

#: The limits a result can name as hit (``SandboxResult.limit``).
LimitName = Literal["wall_time", "cpu_time", "memory", "output", "exports"]

#: How the limits were applied: cgroups v2 (not used yet, see docs/sandbox.md) or resource
#: limits set inside the sandbox before the code runs plus the supervisor's clock and output caps.
Enforcement = Literal["rlimits+supervisor"]


@final
class Limits(BaseModel):
    """The limits of one run. Immutable; unknown keys are rejected.

    The supervisor enforces ``wall_seconds`` and the output caps itself; the others
    are resource limits (``setrlimit``) set inside the sandbox, hard and soft,
    before the first line of the caller's code or program runs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_seconds: _Seconds = 10.0
    """Elapsed time from start to end; past it every process of the sandbox is killed."""
    cpu_seconds: Annotated[int, Field(strict=True, ge=1, le=3600)] = 10
    """CPU time of each process (``RLIMIT_CPU``): ``SIGXCPU`` at the limit, ``SIGKILL`` a second later."""
    memory_bytes: Annotated[int, Field(strict=True, ge=16 * MIB, le=64 * 1024 * MIB)] = 512 * MIB
    """Address space of each process (``RLIMIT_AS``): allocations past it fail (``MemoryError``)."""
    processes: _Count = 32
    """Processes and threads of the sandbox's user, its init included (``RLIMIT_NPROC``)."""
    open_files: _Count = 64
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    file_bytes: _Bytes = 16 * MIB
    """Largest file a process may write (``RLIMIT_FSIZE``); writes past it fail (``EFBIG``)."""
    scratch_bytes: _Bytes = 64 * MIB
    """Size of the private, writable scratch directory (a tmpfs), inputs included."""
    output_bytes: _HeldBytes = 1 * MIB
    """Most bytes kept of stdout and of stderr each; writing more kills the run (limit ``output``)."""
    export_bytes: _HeldBytes = 8 * MIB
    """Most bytes of exported files in one result; more ends the run (limit ``exports``)."""
    egress_bytes: _Bytes = 64 * MIB
    """Most bytes an ``egress`` profile's proxy relays in one run, both ways together."""
    export_files: Annotated[int, Field(strict=True, ge=0, le=1024)] = 32
    """Most exported files in one result."""
