"""`SandboxOptions`: the sandbox tool's settings, from ``[tools.sandbox]`` or ``options={"sandbox": ...}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolbox.provider import describe_validation_error
from toolbox_sandbox._limits import MIB
from toolbox_sandbox._profile import PROFILE_NAME, SandboxProfile

__all__ = ["SandboxOptions", "declared", "parse_options"]

_Size = Annotated[int, Field(strict=True, ge=1, le=256 * MIB)]


@final
class SandboxOptions(BaseModel):
    """Settings of the sandbox tool. Immutable; unknown keys are rejected.

    Without ``profiles`` the tool has one profile, ``default``, with every
    setting at its default: no network, nothing exported, the default limits.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    profiles: dict[str, SandboxProfile] = Field(default_factory=lambda: {"default": SandboxProfile()})
    """The named profiles a call may choose (``profile=...``)."""
    default_profile: str = "default"
    """The profile of a call that names none."""
    bwrap: str = "/usr/bin/bwrap"
    """bubblewrap, the program that builds the sandbox (Debian: ``apt-get install bubblewrap``)."""
    max_code_bytes: _Size = 1 * MIB
    """Largest ``code`` a call may pass."""
    max_input_bytes: _Size = 16 * MIB
    """Largest ``stdin`` plus ``files`` a call may pass, together."""
    max_input_files: Annotated[int, Field(strict=True, ge=0, le=256)] = 32
    """Most ``files`` a call may pass."""
    require_approval: Annotated[bool, Field(strict=True)] = False
    """Every call needs a human approval bound to its exact code (or argv), inputs and profile.
    Read from the policy file's ``[tools.sandbox]`` when the tool is registered."""

    @model_validator(mode="after")
    def _names(self) -> SandboxOptions:
        for name in self.profiles:
            if not PROFILE_NAME.match(name):
                raise ValueError(
                    f"profile names are lowercase letters, digits, '-' and '_' ({name!r} is not)"
                )
        if self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not one of the profiles")
        if not self.bwrap.startswith("/"):
            raise ValueError("bwrap must be an absolute path")
        return self


_USAGE = (
    "configure it in [tools.sandbox] of the policy file or Tools.load(options={'sandbox': {...}}): "
    "profiles (a table of named profiles), default_profile, bwrap, max_code_bytes, max_input_bytes, "
    "max_input_files; see docs/sandbox.md"
)


def parse_options(raw: Mapping[str, Any]) -> SandboxOptions:
    """Validate the sandbox options, or raise a `ValueError` naming the field (never its value)."""
    try:
        return SandboxOptions.model_validate(dict(raw))
    except ValidationError as exc:
        raise ValueError(f"invalid sandbox options ({describe_validation_error(exc)}): {_USAGE}") from None


def declared(raw: Mapping[str, Any]) -> tuple[bool, bool]:
    """What a ``[tools.sandbox]`` table declares for the descriptor: (every profile is
    read_only_world, approval required). An invalid table declares (False, True): UNSAFE and
    approved, the safe side, until the tool reports the error when it is built."""
    try:
        options = SandboxOptions.model_validate(dict(raw))
    except ValidationError:
        return False, True
    read_only = "profiles" in raw and all(p.read_only_world for p in options.profiles.values())
    return read_only, options.require_approval
