"""`FsOptions`: the fs tool's settings, read from ``Tools.load(options={"fs": {...}})``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolbox.provider import describe_validation_error

__all__ = ["FsOptions", "parse_options"]

MiB = 1024 * 1024
_USAGE = (
    'pass Tools.load(..., options={"fs": {"roots": ["/path/to/dir"]}}); roots is a non-empty list '
    "of existing directories, max_read_bytes and max_write_bytes are optional positive integers, "
    "allow_hardlinks an optional boolean"
)

_Size = Annotated[int, Field(strict=True, gt=0)]


@final
class FsOptions(BaseModel):
    """Settings of the fs tool. Immutable; unknown keys are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    roots: Annotated[tuple[str, ...], Field(min_length=1)]
    """Directories the tool may touch, stored as their real paths. The first one anchors relative paths."""
    max_read_bytes: _Size = 10 * MiB
    """Largest file a read returns; a larger one fails without being read."""
    max_write_bytes: _Size = 10 * MiB
    """Largest payload a write accepts."""
    allow_hardlinks: Annotated[bool, Field(strict=True)] = False
    """Read regular files that have several hard links. Off: a hard link inside a root can
    name a file outside it, and nothing in the root shows which link is the original."""

    @field_validator("roots", mode="before")
    @classmethod
    def _as_paths(cls, value: object) -> object:
        if isinstance(value, (str, bytes, os.PathLike)):
            raise ValueError("must be a list of directories, e.g. ['/srv/data'], not a single path")
        if isinstance(value, (list, tuple)):
            return tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value)
        return value

    @field_validator("roots")
    @classmethod
    def _existing_directories(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        resolved: dict[str, None] = {}
        for root in value:
            if not root or "\x00" in root:
                raise ValueError(f"{root!r} is not a usable directory path")
            real = os.path.realpath(root)
            if not os.path.isdir(real):
                raise ValueError(f"{root!r} is not an existing directory; create it or fix the path")
            resolved[real] = None
        return tuple(resolved)


def parse_options(raw: Mapping[str, Any]) -> FsOptions:
    """Validate the fs options, or raise a `ValueError` saying exactly what to pass."""
    if not raw:
        raise ValueError(f"the fs tool needs to know which directories it may use: {_USAGE}")
    try:
        return FsOptions.model_validate(dict(raw))
    except ValidationError as exc:
        raise ValueError(f"invalid fs options ({describe_validation_error(exc)}): {_USAGE}") from None
