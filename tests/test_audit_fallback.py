"""The fallback file: any string survives it, and a bad line never blocks the others."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit_faults import FlakySink
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, tool
from toolbox.audit import AuditEvent, AuditSinkError, AuditTrail, EventType, MemorySink, verify_chain

CALLS: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def echo(text: str) -> str:
    """Return ``text``."""
    CALLS.append(text)
    return text


def down(tmp_path: Path) -> tuple[FlakySink, AuditTrail, Gateway]:
    """A gateway whose store is down: every call is refused and its events kept in the fallback file."""
    sink = FlakySink()
    sink.failing = True
    trail = AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")
    gateway = Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[echo],
        discover=False,
        env={},
        governance=Governance(audit=trail),
    )
    return sink, trail, gateway


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\r", "\x1c", "\x0b", "\ud800"])
def test_line_separators_in_arguments_survive_replay(tmp_path: Path, separator: str) -> None:
    """Regression (finding 6): U+2028 in an argument made replay raise and replay nothing."""
    sink, trail, gateway = down(tmp_path)
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    benign = gateway.invoke("echo", {"text": "plain", "purpose": "Echo"}, context=context)
    odd = gateway.invoke("echo", {"text": f"a{separator}b", "purpose": "Echo"}, context=context)
    assert benign.status is odd.status is Status.DENIED  # STRICT: no record, no run
    assert benign.reason_code == odd.reason_code == "AUDIT_UNAVAILABLE" and CALLS == []
    assert (tmp_path / "fb.jsonl").read_bytes().isascii()
    sink.failing = False
    assert trail.replay_fallback() == 6
    records = sink.read_trace(context.run_id)
    assert [r.type.value for r in records] == [
        "INTENT_DECLARED",
        "GOVERNANCE_DECISION",
        "INVOCATION_RESPONSE",
    ] * 2
    assert verify_chain(records) == []
    assert (tmp_path / "fb.jsonl").read_bytes() == b""


BAD_LINES = [
    b"not json",
    b'{"type": "INTENT_DECLARED"',
    b"[1, 2]",
    b"\xff\xfe",
    b'{"type": "NOPE"}',
    b"[" * 100_000 + b"]" * 100_000,
]


def good_line(trace: str, **fields: Any) -> bytes:
    event = AuditEvent(EventType.SYSTEM_ERROR, trace_id=trace, reason_code="X")
    data = {**event.as_dict(), **fields}
    return json.dumps(data).encode("ascii")


FIELD_BREAKERS = [
    {"extra": 1},
    {"trace_id": 5},
    {"duration": float("nan")},
    {"duration": True},
    {"attempt": "1"},
    {"attempt": 2**63},
    {"event_id": "x" * 65},
    {"event_id": "a b"},
    {"rule_ids": "a"},
    {"rule_ids": [1]},
    {"intent_text": "\ud800"},
    {"timestamp": "yesterday"},
    {"timestamp": "2026-01-01T00:00:00"},
    {"timestamp": "0001-01-01T00:00:00+23:59"},
    {"tenant": ["a"]},
    {"parent_run_id": 7},
]


def test_bad_lines_are_quarantined_and_the_rest_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")
    bad = [*BAD_LINES, *(good_line("secret-trace", **f) for f in FIELD_BREAKERS)]
    lines = [good_line("t1"), *bad, b"", good_line("t2")]
    (tmp_path / "fb.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with caplog.at_level(logging.WARNING, logger="toolbox.audit"):
        report = trail.replay_fallback_report()
    assert report.stored == 2
    numbers = tuple(range(2, 2 + len(bad)))
    assert report.quarantined == numbers
    assert report.quarantine_path == tmp_path / "fb.jsonl.quarantine"
    assert report.quarantine_path.read_bytes() == b"".join(line + b"\n" for line in bad)
    assert [r.trace_id for r in sink.records] == ["t1", "t2"]
    assert (tmp_path / "fb.jsonl").read_bytes() == b""
    message = caplog.records[-1].getMessage()
    assert f"{len(bad)} line(s)" in message and ", ".join(map(str, numbers)) in message
    assert "secret-trace" not in caplog.text and "not json" not in caplog.text
    assert trail.replay_fallback() == 0  # nothing left, the quarantine is kept as it was
    assert report.quarantine_path.read_bytes().count(b"\n") == len(bad)


def test_a_failing_sink_keeps_the_valid_lines(tmp_path: Path) -> None:
    """The store is down: nothing is lost, the bad line is quarantined once, the rest waits."""
    sink = FlakySink()
    sink.failing = True
    trail = AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")
    good = good_line("t1")
    (tmp_path / "fb.jsonl").write_bytes(good + b"\nnot json\n")
    with pytest.raises(AuditSinkError):
        trail.replay_fallback()
    assert (tmp_path / "fb.jsonl").read_bytes() == good + b"\n"
    assert (tmp_path / "fb.jsonl.quarantine").read_bytes() == b"not json\n"
    sink.failing = False
    assert trail.replay_fallback() == 1
    assert [r.trace_id for r in sink.records] == ["t1"]
    assert (tmp_path / "fb.jsonl.quarantine").read_bytes() == b"not json\n"


def test_events_the_sink_refuses_one_by_one_are_quarantined(tmp_path: Path) -> None:
    """A duplicate event id (kept twice, e.g. a fan-out that stored it in one sink) blocks nothing."""
    from toolbox.audit import SqliteSink  # type: ignore[attr-defined]

    sink = SqliteSink(str(tmp_path / "audit.db"))
    first = AuditEvent(EventType.SYSTEM_ERROR, trace_id="t1", reason_code="X")
    sink.append([first])
    trail = AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")
    duplicate = json.dumps(first.as_dict()).encode()
    (tmp_path / "fb.jsonl").write_bytes(b"\n".join([good_line("t2"), duplicate, good_line("t3")]) + b"\n")
    report = trail.replay_fallback_report()
    assert (report.stored, report.quarantined) == (2, (2,))
    assert (tmp_path / "fb.jsonl.quarantine").read_bytes() == duplicate + b"\n"
    assert [len(sink.read_trace(t)) for t in ("t1", "t2", "t3")] == [1, 1, 1]
    assert (tmp_path / "fb.jsonl").read_bytes() == b""


def test_no_fallback_file_means_nothing_to_replay(tmp_path: Path) -> None:
    assert AuditTrail(MemorySink(), fallback_path=None).replay_fallback_report().stored == 0
    assert AuditTrail(MemorySink(), fallback_path=tmp_path / "none.jsonl").replay_fallback() == 0


def test_an_unserialisable_event_costs_no_other(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from toolbox.audit._fallback import FallbackFile

    fallback = FallbackFile(tmp_path / "fb.jsonl")
    broken = AuditEvent(EventType.SYSTEM_ERROR, trace_id="t1", duration=float("nan"))
    fine = AuditEvent(EventType.SYSTEM_ERROR, trace_id="t2")
    with caplog.at_level(logging.ERROR, logger="toolbox.audit"):
        assert fallback.keep([broken, fine]) is False
    assert "not serialisable (ValueError)" in caplog.text
    stored: list[AuditEvent] = []
    assert fallback.replay(stored.extend).stored == 1
    assert [e.trace_id for e in stored] == ["t2"]


def test_an_unwritable_fallback_file_is_reported_not_raised(tmp_path: Path) -> None:
    from toolbox.audit._fallback import FallbackFile

    fallback = FallbackFile(tmp_path / "missing-dir" / "fb.jsonl")
    assert fallback.keep([AuditEvent(EventType.SYSTEM_ERROR, trace_id="t")]) is False


# -- property: any event survives write + replay -----------------------------------------------

# NUL only where a model can put it (the name, the intent text), which an event escapes; in the
# fields a trusted context or the code fills, a line holding NUL is crafted: replay refuses it.
# Those fields are valid UTF-8 text (codec): st.characters() alone also draws lone surrogates.
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
_MODEL_TEXT = st.text(max_size=30)
_OPTIONAL = st.none() | _TEXT
EVENTS = st.builds(
    AuditEvent,
    st.sampled_from(list(EventType)),
    trace_id=_TEXT,
    correlation_id=_OPTIONAL,
    name=_MODEL_TEXT,
    tool=_MODEL_TEXT,
    operation=_MODEL_TEXT,
    risk=_OPTIONAL,
    decision=_OPTIONAL,
    reason_code=_OPTIONAL,
    rule_ids=st.lists(_TEXT, max_size=3).map(tuple),
    intent_text=st.none() | _MODEL_TEXT,
    tenant=_OPTIONAL,
    principal=_OPTIONAL,
    payload_summary=_OPTIONAL,
    status=_OPTIONAL,
    duration=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    attempt=st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
)


@given(batch=st.lists(EVENTS, min_size=1, max_size=4))
def test_any_event_survives_write_and_replay(
    tmp_path_factory: pytest.TempPathFactory, batch: list[AuditEvent]
) -> None:
    from toolbox.audit._fallback import FallbackFile, event_line

    path = tmp_path_factory.mktemp("fb") / "fb.jsonl"
    fallback = FallbackFile(path)
    assert fallback.keep(batch)
    stored: list[AuditEvent] = []
    report = fallback.replay(stored.extend)
    assert (report.stored, report.quarantined) == (len(batch), ())
    for original, replayed in zip(batch, stored, strict=True):
        assert event_line(replayed) == event_line(original)
    sink = MemorySink()
    sink.append(stored)
    assert len(sink.records) == len(batch)  # and every one of them is storable


def test_a_delegated_run_s_parent_run_id_survives_replay(tmp_path: Path) -> None:
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")
    (tmp_path / "fb.jsonl").write_bytes(good_line("child", parent_run_id="parent-run") + b"\n")
    assert trail.replay_fallback_report().stored == 1
    assert [r.parent_run_id for r in sink.records] == ["parent-run"]
