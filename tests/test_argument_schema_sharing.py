"""Operation schemas are derived once per function and shared by every catalog (pipeline.checks._schemas).

Sharing must change nothing a caller can see: a schema whose annotations did not
resolve is derived again, a refusal is raised every time, a dropped function's
schemas go with it, and what one caller does to its definitions no other sees.
"""

from __future__ import annotations

import copy
import functools
import gc
import threading
import weakref
from typing import Any

import pytest

from toolbox import Effect, ExecutionContext, Gateway, RiskClass, Status, ToolPolicy, tool
from toolbox.errors import ConfigurationError
from toolbox.pipeline.checks import _schemas
from toolbox.pipeline.checks._schemas import operation_schema
from toolbox.testing import fake_provider

CONTEXT = ExecutionContext(tenant="tenant-a", principal="alice")


@tool(risk=RiskClass.MEMORY_ONLY)
def post(text: str, tags: list[str] | None = None, priority: int = 0) -> str:
    """Post a note."""
    return text


def load(*providers: Any) -> Gateway:
    return Gateway.load(policy=ToolPolicy.standard(), env={}, providers=providers, discover=False)


def defined(source: str, namespace: dict[str, Any] | None = None) -> Any:
    """The function ``source`` defines, created at run time, with ``namespace`` as its globals."""
    scope: dict[str, Any] = {} if namespace is None else namespace
    exec(compile(source, "<dynamic>", "exec"), scope)
    return next(value for value in scope.values() if callable(value) and getattr(value, "__code__", None))


def test_two_gateways_over_one_tool_share_its_schemas() -> None:
    first, second = load(post, fake_provider("acme")), load(post, fake_provider("acme"))
    assert first.catalog.schema("post", "call") is second.catalog.schema("post", "call")
    assert first.catalog.schema("acme", "read") is second.catalog.schema("acme", "read")
    assert first.catalog.schema("post", "call").name == "post"  # a @tool function: by its own name
    assert first.catalog.schema("acme", "read").name == "acme.read"


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the argument models built from now on (``create_model`` counted)."""
    names: list[str] = []
    real = _schemas.create_model

    def counted(name: str, /, **fields: Any) -> Any:
        names.append(name)
        return real(name, **fields)

    monkeypatch.setattr(_schemas, "create_model", counted)
    return names


def test_a_tool_function_is_derived_once_at_decoration(made: list[str]) -> None:
    """Decoration derives the schema as catalogs ask for it: no catalog builds another model."""

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="lookup", summary="Look something up.")
    def find(query: str) -> str:
        return query

    assert made == ["LookupCallArguments"]
    for _ in range(3):
        assert [d["name"] for d in load(find).definitions()] == ["lookup"]
    assert made == ["LookupCallArguments"]


def test_a_tool_methods_kept_schema_is_found_without_deriving_again(made: list[str]) -> None:
    """A method (``self`` dropped) finds its kept schema on the look-up, not by deriving it again."""

    class Notes:
        def read(self, key: str) -> str:
            return key

    first = operation_schema("notes", "read", Notes.read, Effect.READ_ONLY, "Read a note.")
    assert "self" not in first.json_schema()["properties"]
    assert made == ["NotesReadArguments"]
    assert operation_schema("notes", "read", Notes.read, Effect.READ_ONLY, "Read a note.") is first
    assert made == ["NotesReadArguments"]  # found, not derived and then matched to the kept one


def test_the_other_arguments_are_part_of_the_key() -> None:
    method = fake_provider("acme").tool_type.read
    read = operation_schema("acme", "read", method, Effect.READ_ONLY, "Read.")
    assert operation_schema("acme", "read", method, Effect.READ_ONLY, "Read.") is read
    others = [
        operation_schema("other", "read", method, Effect.READ_ONLY, "Read."),
        operation_schema("acme", "get", method, Effect.READ_ONLY, "Read."),
        operation_schema("acme", "read", method, Effect.UNSAFE, "Read."),
        operation_schema("acme", "read", method, Effect.READ_ONLY, "Read it."),
        operation_schema("acme", "read", method, Effect.READ_ONLY, "Read.", name="acme"),
    ]
    assert all(other is not read for other in others)
    assert [o.name for o in others] == ["other.read", "acme.get", "acme.read", "acme.read", "acme"]
    assert others[2].intent_field == "audit_as" and read.intent_field == "purpose"
    assert others[3].summary == "Read it."


def test_self_is_dropped_as_each_call_asks_whichever_comes_first() -> None:
    """``self`` is dropped for the function itself, kept as an argument behind a plain wrapper."""
    function = defined("def find(self, query: str) -> None: ...")

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None: ...

    behind = operation_schema("acme", "find", wrapper, Effect.READ_ONLY)
    itself = operation_schema("acme", "find", function, Effect.READ_ONLY)
    assert list(behind.json_schema()["properties"]) == ["self", "query", "purpose"]
    assert list(itself.json_schema()["properties"]) == ["query", "purpose"]
    assert operation_schema("acme", "find", wrapper, Effect.READ_ONLY) is behind
    assert operation_schema("acme", "find", function, Effect.READ_ONLY) is itself


def test_annotations_that_resolve_later_are_used_once_they_do() -> None:
    namespace: dict[str, Any] = {}
    function = defined("from __future__ import annotations\ndef find(query: Later) -> None: ...\n", namespace)
    early = operation_schema("acme", "find", function, Effect.READ_ONLY)
    assert "type" not in early.json_schema()["properties"]["query"]  # unresolved: any JSON value
    assert operation_schema("acme", "find", function, Effect.READ_ONLY) is not early  # not kept
    namespace["Later"] = int
    resolved = operation_schema("acme", "find", function, Effect.READ_ONLY)
    assert resolved.json_schema()["properties"]["query"]["type"] == "integer"
    assert operation_schema("acme", "find", function, Effect.READ_ONLY) is resolved


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def find(*queries: str) -> None: ...", r"\*args and \*\*kwargs"),
        ("def find(purpose: str) -> None: ...", "clashes with the intent"),
    ],
)
def test_a_refusal_is_raised_every_time(source: str, message: str) -> None:
    function = defined(source)
    for _ in range(2):
        with pytest.raises(ConfigurationError, match=message):
            operation_schema("acme", "find", function, Effect.READ_ONLY)
    assert function not in _schemas._derived


def test_a_dropped_function_takes_its_schemas_with_it() -> None:
    function = defined("def find_and_drop(query: str, limit: int = 10) -> None: ...")
    schema = operation_schema("acme", "find", function, Effect.READ_ONLY)
    schema.json_schema()
    assert function in _schemas._derived
    dropped, model = weakref.ref(function), weakref.ref(schema.model)
    del function, schema
    gc.collect()  # the function (a cycle with its globals) goes, and its entry with it;
    gc.collect()  # then the entry's schema and model (cycles of their own)
    assert dropped() is None, "the kept schema holds its function"
    assert model() is None, "its model is kept after its function is gone"
    assert "find_and_drop" not in {f.__name__ for f in _schemas._derived}


def test_callables_other_than_plain_functions_are_derived_each_time() -> None:
    """A callable object may define equality as it likes, a bound method lives one access: never kept."""

    class Finder:
        def __call__(self, query: str) -> None: ...

        def find(self, query: str) -> None: ...

    finder = Finder()
    partial = functools.partial(lambda query, limit: None, limit=1)
    for function in (finder, finder.find, partial):
        first = operation_schema("acme", "find", function, Effect.READ_ONLY)
        assert operation_schema("acme", "find", function, Effect.READ_ONLY) is not first
        assert "query" in first.json_schema()["properties"]


def test_threads_deriving_at_once_get_one_schema() -> None:
    function = defined("def find(query: str, limit: int = 10) -> None: ...")
    start = threading.Barrier(8)
    found: list[Any] = []

    def derive() -> None:
        start.wait()
        found.append(operation_schema("acme", "find", function, Effect.READ_ONLY))

    threads = [threading.Thread(target=derive) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 8 and all(schema is found[0] for schema in found)


def test_what_one_caller_does_to_its_definitions_no_other_caller_sees() -> None:
    first, second = load(post), load(post)
    shown = copy.deepcopy(second.definitions())
    for format in ("neutral", "anthropic", "mcp"):
        for definition in first.definitions(format):
            key = {"neutral": "parameters", "anthropic": "input_schema", "mcp": "inputSchema"}[format]
            schema = definition[key]
            schema["properties"]["text"]["title"] = "changed"
            schema["required"].append("tags")
            del schema["properties"]["priority"]
    assert second.definitions() == shown
    assert first.definitions() == shown  # the same gateway's next definitions too


def test_the_library_never_changes_a_shared_schema() -> None:
    """Every reader of the shared JSON Schema (formats, strict mode, null stripping) leaves it as it was."""
    gateway = load(post)
    shared = gateway.catalog.schema("post", "call").json_schema()
    before = copy.deepcopy(shared)
    for format in ("neutral", "openai", "anthropic", "mcp"):
        gateway.definitions(format)
    from toolbox.doors.tool_calls import without_optional_nulls

    arguments = {"text": "hi", "tags": None, "priority": None, "audit_as": "a test"}
    assert without_optional_nulls(gateway, "post", dict(arguments)) == {"text": "hi", "audit_as": "a test"}
    result = gateway.invoke("post", {"text": "hi", "tags": None, "audit_as": "a test"}, context=CONTEXT)
    assert result.status is Status.SUCCESS, result
    assert shared == before
    assert load(post).catalog.schema("post", "call").json_schema() is shared
