"""`SandboxProfile`: one named shape of sandbox an operator declares in ``[tools.sandbox.profiles]``."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Annotated, Literal, final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolbox_http import EgressPolicy
from toolbox_sandbox._limits import Limits

__all__ = ["PROFILE_NAME", "SandboxProfile"]

PROFILE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Patterns are matched against paths relative to the scratch directory; no '..', no absolute path.
_EXPORT = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_.*?\[\]/-]{1,128}$")
# What the sandbox mounts itself: an operator's bind there would hide or weaken it.
# Loopback in every spelling a connection accepts (0.0.0.0 and :: reach the host itself on Linux).
_LOOPBACK = tuple(
    ipaddress.ip_network(n) for n in ("127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128", "::ffff:127.0.0.0/104")
)
_RESERVED = ("/proc", "/dev", "/sys", "/scratch", "/sandbox", "/run")


def _absolute_path(value: str, what: str) -> str:
    if not value.startswith("/") or "\x00" in value or "\n" in value:
        raise ValueError(f"{what} must be absolute paths")
    normal = os.path.normpath(value)
    if normal == "/":
        raise ValueError(f"{what} may not be the root directory '/'")
    if any(normal == r or normal.startswith(r + "/") for r in _RESERVED):
        raise ValueError(f"{what} may not be under {', '.join(_RESERVED)}: the sandbox mounts them itself")
    return normal


@final
class SandboxProfile(BaseModel):
    """How a run is confined: interpreter, programs, mounts, environment, network and limits.

    Immutable; unknown keys are rejected. The root the code sees holds only the
    interpreter and its standard library, the shared libraries, the profile's
    ``programs`` and ``read_only`` paths, a private tmpfs ``/scratch`` (the working
    directory), a fresh ``/proc`` and a minimal ``/dev``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    python: str = "/usr/bin/python3"
    """The interpreter ``run_python`` uses (an absolute path on the host); its standard library is
    mounted read-only, its site-packages are not (the interpreter runs with ``-I -S``)."""
    programs: tuple[str, ...] = ()
    """Absolute paths of the programs ``run`` may start (besides ``python``), mounted read-only."""
    read_only: tuple[str, ...] = ()
    """More host paths mounted read-only at the same place (e.g. ``/usr/share/zoneinfo``)."""
    read_write: tuple[str, ...] = ()
    """Host directories mounted writable at the same place: the code can change the world there."""
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    """The whole environment of the code: nothing of the host's environment is passed."""
    exports: tuple[str, ...] = ()
    """Glob patterns (relative to ``/scratch``) of the files returned in the result."""
    network: Literal["none", "egress"] = "none"
    """``none``: a network namespace with only its own loopback. ``egress``: HTTP(S) through the
    tool's proxy, which allows only what ``egress`` allows and never the host's loopback."""
    egress: EgressPolicy = EgressPolicy(hosts=())
    """Where an ``egress`` profile may connect (toolbox-http's policy); by default nowhere."""
    read_only_world: bool = False
    """The operator's declaration that runs change nothing outside their scratch: no network and
    no ``read_write`` mounts. When every profile declares it, the operations are ``IDEMPOTENT``."""
    limits: Limits = Limits()
    """The run's limits."""

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        return _absolute_path(value, "python")

    @field_validator("programs", "read_only", "read_write")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_absolute_path(v, "mount and program paths") for v in value))

    @field_validator("exports")
    @classmethod
    def _exports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if not _EXPORT.match(pattern):
                raise ValueError(
                    "exports are glob patterns relative to /scratch: letters, digits, '_', '.', '-', '/', "
                    "'*', '?', '[', ']', without '..' or a leading '/'"
                )
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _ENV_NAME.match(name):
                raise ValueError("environment variable names must be letters, digits and '_'")
            if "\x00" in text:
                raise ValueError(f"environment variable {name} contains a NUL byte")
        return value

    @model_validator(mode="after")
    def _declaration(self) -> SandboxProfile:
        if self.read_only_world and self.network != "none":
            raise ValueError("read_only_world needs network = 'none': a network reaches the world")
        if self.read_only_world and self.read_write:
            raise ValueError("read_only_world excludes read_write mounts: the code could change them")
        if self.network == "none" and "egress" in self.model_fields_set:
            raise ValueError("egress is set but network is 'none'; set network = 'egress' to use it")
        if self.network == "egress" and not self.egress.hosts:
            raise ValueError("network = 'egress' needs egress.hosts: list the hosts the code may reach")
        for network in self.egress.allow_networks:
            if any(
                network.overlaps(loopback) for loopback in _LOOPBACK if loopback.version == network.version
            ):
                raise ValueError(
                    "egress.allow_networks may not include loopback: the host's services stay out"
                )
        return self
