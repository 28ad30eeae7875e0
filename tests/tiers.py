"""Sizes that differ between the test tiers (root conftest.py: the default tier and ``--full``).

A promise checked at full size only before a release (thousands of calls, eight racing
processes) is still checked on every change, at a size that keeps the default tier fast: the
same test, the same assertions, fewer calls or processes.
"""

from __future__ import annotations

import os

FULL = os.environ.get("TOOLBOX_TEST_TIER") == "full"


def sized(default: int, full: int) -> int:
    """``full`` in the full tier, else ``default``."""
    return full if FULL else default
