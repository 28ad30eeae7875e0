"""The intent phase: no execute() before intent, text rules, execute once, async."""

import asyncio
import threading

import pytest

from toolbox import Effect, OperationDescriptor, RiskClass, ToolDeniedError, ToolDescriptor, ToolProvider
from toolbox.errors import IntentAlreadyExecutedError
from toolbox.testing import build_tools, fake_provider


@pytest.fixture
def fake():
    return build_tools(fake_provider("f")).get("f")


def test_read_intent_has_no_execute(fake):
    """An intent cannot run: the error says to declare purpose or audit_as."""
    intent = fake.read(1)
    with pytest.raises(
        AttributeError, match=r'declare the intent first, with .purpose\("..."\) or .audit_as'
    ):
        intent.execute()
    with pytest.raises(AttributeError, match="declare the intent first"):
        intent.aexecute()
    assert not hasattr(intent, "execute")
    assert fake.calls == []


def test_write_intent_accepts_only_audit_as(fake):
    """Side-effecting operations refuse purpose() and point to audit_as()."""
    intent = fake.write(1)
    with pytest.raises(AttributeError, match=r"has side effects: declare it with .audit_as"):
        intent.purpose("Because")
    with pytest.raises(AttributeError, match=r'declare the intent first, with .audit_as\("..."\)$'):
        intent.execute()
    assert intent.audit_as("Write one").execute() == 1


def test_read_accepts_both(fake):
    """Reads accept purpose() or audit_as()."""
    assert fake.read(1).purpose("Read one").execute() == 1
    assert fake.read(2).audit_as("Read two").execute() == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \t ", "control characters|empty"),
        ("x" * 1001, "1001 characters"),
        ("line one\nline two", "control characters"),
        ("bell\x07", "control characters"),
        ("del\x7f", "control characters"),
        ("next line\x85", "control"),
        # Unicode line and paragraph separators and bidirectional controls are refused alike.
        ("line one\u2028line two", "line separators"),
        ("para\u2029graph", "line separators"),
        ("Refund \u202e54 ot 3", "bidirectional controls"),
        ("isolate \u2066x\u2069", "bidirectional controls"),
        ("mark \u200f and \u200e and \u061c", "bidirectional controls"),
        (None, "must be a string"),
        (b"bytes", "must be a string"),
    ],
)
def test_bad_intent_text_fails_at_declaration(fake, text, message):
    """Bad intent text raises ValueError from purpose()/audit_as() themselves."""
    with pytest.raises(ValueError, match=message):
        fake.read(1).purpose(text)
    with pytest.raises(ValueError, match=message):
        fake.write(1).audit_as(text)
    assert fake.calls == []


def test_max_length_intent_is_fine(fake):
    """Exactly 1000 characters is allowed."""
    assert fake.read(1).purpose("x" * 1000).execute() == 1


def test_executes_once(fake):
    """A ready object executes once; a second execute() raises and runs nothing."""
    ready = fake.read(1).purpose("Once")
    ready.execute()
    with pytest.raises(IntentAlreadyExecutedError, match="build a new intent"):
        ready.execute()
    with pytest.raises(IntentAlreadyExecutedError):
        asyncio.run(ready.aexecute())
    assert fake.calls == [("read", 1)]


def test_concurrent_execute_runs_once(fake):
    """Racing threads cannot execute one ready object twice."""
    ready = fake.read(1).purpose("Race")
    errors = []

    def run():
        try:
            ready.execute()
        except IntentAlreadyExecutedError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 1
    assert len(errors) == 7


def test_memory_only_aexecute_runs_inline(fake):
    """A MEMORY_ONLY tool's aexecute runs on the event loop's thread, not a worker."""
    seen = []

    async def main():
        seen.append(threading.get_ident())
        ready = fake.read(1).purpose("Inline")
        fake.calls.clear()
        original = fake._run

        def spy(op, value):
            seen.append(threading.get_ident())
            return original(op, value)

        fake._run = spy
        return await ready.aexecute()

    assert asyncio.run(main()) == 1
    assert seen[0] == seen[1]


def test_sync_io_tool_aexecute_uses_a_thread():
    """A sync-only tool that does I/O runs on a worker thread from async code."""
    tools = build_tools(
        fake_provider("io", risk=RiskClass.EXTERNAL_RESOURCE),
        policy=__import__("toolbox").ToolPolicy.standard().allow("io"),
    )
    tool = tools.get("io")
    threads = []
    original = tool._run
    tool._run = lambda op, value: threads.append(threading.get_ident()) or original(op, value)

    async def main():
        return threading.get_ident(), await tool.read(5).purpose("Thread").aexecute()

    loop_thread, value = asyncio.run(main())
    assert value == 5
    assert threads and threads[0] != loop_thread


def test_trace_records_intent_and_outcome(fake):
    """The trace holds intent, start, end, status, duration; failures carry the error type."""
    trace = build_tools(fake_provider("g")).context.trace
    assert len(trace) == 0
    ready = fake.read("payload-body").purpose("Read it")
    [record] = fake._runtime.context.trace.operations("f")
    assert (record.tool, record.operation, record.intent_kind, record.intent_text) == (
        "f",
        "read",
        "purpose",
        "Read it",
    )
    assert record.status == "DECLARED" and record.started_at is None
    ready.execute()
    assert record.status == "SUCCESS"
    assert record.duration is not None and record.duration >= 0
    assert "payload-body" not in repr(record.as_dict()), "arguments and bodies are never recorded"


def test_failures_are_recorded_and_reraised():
    """An exception inside the tool is re-raised and recorded as ERROR or DENIED."""

    class Failing:
        def __init__(self, runtime):
            self.rt = runtime

        def read(self, exc):
            def boom():
                raise exc

            return self.rt.read_intent("read", boom)

    base = fake_provider("x")
    tools = build_tools(ToolProvider(tool_type=Failing, descriptor=base.descriptor))
    tool = tools.get(Failing)
    with pytest.raises(KeyError):
        tool.read(KeyError("k")).purpose("Fail").execute()
    denied = ToolDeniedError("no", tool="x", reason_code="R", rule="r")
    with pytest.raises(ToolDeniedError):
        tool.read(denied).purpose("Deny").execute()
    first, second = tools.context.trace.operations()
    assert (first.status, first.error_type) == ("ERROR", "KeyError")
    assert (second.status, second.error_type) == ("DENIED", "ToolDeniedError")


def test_provider_bug_effect_mismatch_is_caught():
    """A provider cannot hand out purpose() for a write, nor audit-only for a read."""
    desc = ToolDescriptor(
        name="bug",
        version="1",
        risk=RiskClass.MEMORY_ONLY,
        operations=[
            OperationDescriptor(name="read", effect=Effect.READ_ONLY),
            OperationDescriptor(name="write", effect=Effect.IDEMPOTENT),
        ],
    )

    class Buggy:
        def __init__(self, runtime):
            self.rt = runtime

    tools = build_tools(ToolProvider(tool_type=Buggy, descriptor=desc))
    rt = tools.get(Buggy).rt
    with pytest.raises(TypeError, match="must return write_intent"):
        rt.read_intent("write", lambda: None)
    with pytest.raises(TypeError, match="must return write_intent"):
        rt.read_intent("undeclared", lambda: None)
    with pytest.raises(TypeError, match="must return read_intent"):
        rt.write_intent("read", lambda: None)
