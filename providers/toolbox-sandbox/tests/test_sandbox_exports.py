"""The export stream is untrusted: hostile streams yield no file, never a path outside scratch."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox_sandbox._exports import parse_exports


def record(name: bytes, data: bytes) -> bytes:
    return b"F" + struct.pack(">H", len(name)) + name + struct.pack(">Q", len(data)) + data


def test_a_well_formed_stream():
    parsed = parse_exports(b"S" + record(b"a.txt", b"hi") + b"M" + b"E", max_files=4, max_bytes=10)
    assert parsed.started and parsed.valid and parsed.complete and parsed.memory_error
    assert [(f.path, f.content, f.size) for f in parsed.files] == [("a.txt", b"hi", 2)]


@pytest.mark.parametrize(
    "stream",
    [
        record(b"../etc/passwd", b"x") + b"E",
        record(b"/etc/passwd", b"x") + b"E",
        record(b"a/../../b", b"x") + b"E",
        record(b"a//b", b"x") + b"E",
        record(b"..", b"x") + b"E",
        record(b"", b"x") + b"E",
        record(b"\xff\xfe", b"x") + b"E",
        record(b"a\x00b", b"x") + b"E",
        record(b"a", b"x") + b"EEEE",  # bytes after the end
        b"F" + struct.pack(">H", 5) + b"a.txt" + struct.pack(">Q", 2**60) + b"x",  # a size it does not have
        record(b"a", b"x" * 11) + b"E",  # over max_bytes
        b"".join(record(f"f{i}".encode(), b"") for i in range(5)) + b"E",  # over max_files
        b"Z" + b"E",
        b"F\x00",
        b"SS" + b"E",  # a second start marker
        record(b"x" * 1025, b"") + b"E",  # a name longer than any the init sends
    ],
)
def test_hostile_streams_yield_no_files(stream):
    parsed = parse_exports(stream, max_files=4, max_bytes=10)
    assert not parsed.valid
    assert parsed.files == []


def test_a_stream_cut_before_its_end_is_incomplete():
    parsed = parse_exports(b"S" + record(b"a", b"x"), max_files=4, max_bytes=10)
    assert parsed.started and not parsed.complete


@given(st.binary(max_size=300))
def test_any_bytes_parse_without_error_and_stay_inside(data):
    parsed = parse_exports(data, max_files=4, max_bytes=64)
    for exported in parsed.files:
        assert not exported.path.startswith("/") and ".." not in exported.path.split("/")
    assert sum(f.size for f in parsed.files) <= 64
