"""`wait_until`: bounded polling on state, for tests that wait on another thread or process.

The bound only decides how long a broken test takes to fail; it asserts nothing about speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Return once ``condition()`` holds; fail the test if it still does not after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)
