"""The installed entry points of a group, listed again only when an install may have changed them.

``importlib_metadata.entry_points`` reads every installed distribution's metadata
on each call (milliseconds with a hundred distributions), and every discovery
asks. The listing (each entry point with its distribution's name) is kept for
one key: the ``sys.path`` entries, each with its modification time, plus the
working directory when an entry is relative, the ``sys.meta_path`` finders and
the listing function itself. Installing or removing a distribution creates or
removes a ``*.dist-info`` folder, which moves its parent's modification time; a
new ``sys.path`` entry changes the key. Loading the entry points and the
policy's decisions about them stay per call (`toolbox.registry._discovery`).

A folder modified less than `_SETTLING_NS` before a listing is read may change
again without its timestamp moving (timestamps are coarse: a clock tick, or two
seconds on FAT): such a listing is used once, not kept.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import importlib_metadata

__all__ = ["clear", "entry_points"]

#: How recent a modification time must be for the listing not to be kept (more than any
#: filesystem's timestamp granularity).
_SETTLING_NS = 3_000_000_000

_Listing = tuple[tuple[importlib_metadata.EntryPoint, str], ...]

_lock = threading.Lock()
_cached: tuple[object, _Listing] | None = None


def _mtime(entry: object) -> int | None:
    """``entry``'s modification time in ns; None when it cannot be read (missing, or not a path)."""
    if not isinstance(entry, (str, bytes, os.PathLike)):
        return None
    try:
        return os.stat(entry or ".").st_mtime_ns
    except (OSError, ValueError):  # missing, unreadable, or an invalid name
        return None


def _key(group: str) -> tuple[object, bool]:
    """The listing's key, and whether it is settled (no folder of it modified just now)."""
    entries = tuple(sys.path)
    mtimes = tuple(_mtime(entry) for entry in entries)
    cwd: str | None = None
    if any(isinstance(e, (str, bytes, os.PathLike)) and not os.path.isabs(e) for e in entries):
        try:  # "" and other relative entries name folders of the working directory
            cwd = os.getcwd()
        except OSError:
            cwd = None
    recent = time.time_ns() - _SETTLING_NS
    settled = all(mtime is None or mtime < recent for mtime in mtimes)
    key = (group, entries, mtimes, cwd, tuple(sys.meta_path), importlib_metadata.entry_points)
    return key, settled


def _listed(group: str) -> _Listing:
    return tuple(
        (ep, ep.dist.name if ep.dist is not None else "unknown")
        for ep in importlib_metadata.entry_points(group=group)
    )


def entry_points(group: str) -> _Listing:
    """The installed entry points of ``group``, each with its distribution's name ("unknown" if none)."""
    global _cached  # noqa: PLW0603 - a one-entry cache
    key, settled = _key(group)
    with _lock:  # one thread lists; threads constructing at the same time wait for its listing
        cached = _cached
        if cached is not None and cached[0] == key:
            return cached[1]
        listing = _listed(group)
        _cached = (key, listing) if settled else None
        return listing


def clear() -> None:
    """Forget the kept listing (benchmarks measuring a cold discovery; tests)."""
    global _cached  # noqa: PLW0603 - a one-entry cache
    with _lock:
        _cached = None
