"""Garbage-collector checks that walk only what the test made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_sees_only_new_objects() -> Iterator[None]:
    """Inside the block, collections and ``gc.get_objects()`` meet only objects made in it.

    A worker that has imported every framework holds a few million objects: each full
    ``gc.collect()`` walked them all (~0.4 s). ``gc.freeze()`` moves them to the permanent
    generation for the block; a collection still untracks, frees and (``DEBUG_SAVEALL``) saves
    the objects the test made. ``gc.unfreeze()`` gives the heap back to the collector.
    """
    # A forked worker starts with the collected heap frozen already (toolbox_test_support/
    # forked.py): it stays frozen, with what the worker made before this block.
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()
