"""Malformed policy files: every one is a PolicyFileError naming the key path, never another error."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox import Effect, OperationDescriptor, RiskClass, ToolDescriptor, ToolPolicy, ToolProvider, Tools
from toolbox.cli import main
from toolbox.errors import PolicyFileError
from toolbox.governance._policy_file import policy_from_mapping
from toolbox.testing import test_context

SOURCE = "policy.toml"


def base_document() -> dict[str, Any]:
    """A valid file using every section."""
    return {
        "version": 1,
        "base": "standard",
        "allow": {"tools": ["http"], "risks": []},
        "deny": {"tools": ["fs"], "risks": ["PRIVILEGED"]},
        "providers": {"block": ["evil-dist"]},
        "roles": {"analyst": ["calculator", "http.get"]},
        "guardrails": {
            "mode": "ENFORCE",
            "rules": [{"id": "R", "action": "WARN", "tool": "calculator", "argument": "a", "in": [1, 2]}],
        },
        "audit": {
            "mode": "STRICT",
            "fallback": "fb.jsonl",
            "payload": "SUMMARY",
            "max_summary": 512,
            "redact_keys": ["ssn"],
            "auditor_roles": ["auditor"],
            "queue_size": 10,
            "sinks": [{"type": "memory"}],
        },
        "tools": {"calculator": {"precision": 3}},
    }


# The findings of the review, and their neighbours: (path, value, key path named in the error).
FINDINGS = [
    (("allow", "risks"), [[]], "allow.risks[0]"),
    (("deny", "risks"), [{}], "deny.risks[0]"),
    (("guardrails", "rules"), 5, "guardrails.rules"),
    (("guardrails", "rules", 0, "action"), ["DENY"], "guardrails.rules[0].action"),
    (("guardrails", "mode"), ["REPORT"], "guardrails.mode"),
    (("guardrails", "rules", 0, "id"), 5, "guardrails.rules[0].id"),
    (("guardrails", "rules", 0, "tool"), ["calc"], "guardrails.rules[0].tool"),
    (("guardrails", "rules", 0, "in"), 5, "guardrails.rules[0].in"),
    (
        ("guardrails", "rules", 0),
        {"id": "R", "action": "DENY", "argument": "a", "less_than": "9"},
        "less_than",
    ),
    (("guardrails", "rules", 0), {"id": "R", "action": "DENY", "argument": 5, "equals": 1}, "argument"),
    (("guardrails", "rules", 0), {"id": "R", "action": "DENY", "argument": "a", "matches": 5}, "matches"),
    (("guardrails", "rules", 0), 5, "guardrails.rules[0]"),
    (("audit", "mode"), ["STRICT"], "audit.mode"),
    (("audit", "redact_keys"), 5, "audit.redact_keys"),
    (("audit", "redact_keys"), [5], "audit.redact_keys[0]"),
    (("audit", "max_summary"), "5", "audit.max_summary"),
    (("audit", "max_summary"), True, "audit.max_summary"),
    (("audit", "payload"), ["NONE"], "audit.payload"),
    (("audit", "queue_size"), "5", "audit.queue_size"),
    (("audit", "queue_size"), 0, "audit.queue_size"),
    (("audit", "fallback"), 5, "audit.fallback"),
    (("audit", "auditor_roles"), "auditor", "audit.auditor_roles"),
    (("audit", "sinks"), {"type": "memory"}, "audit.sinks"),
    (("audit", "sinks", 0), "memory", "audit.sinks[0]"),
    (("audit", "sinks", 0, "type"), ["memory"], "audit.sinks[0].type"),
    (("audit", "sinks", 0), {"type": "jsonl", "path": 5}, "audit.sinks[0].path"),
    (("audit", "sinks", 0), {"type": "postgres", "url_env": ["X"]}, "audit.sinks[0].url_env"),
    (("audit",), ["x"], "audit"),
    (("roles", "analyst"), "calculator", "roles.analyst"),
    (("roles", "analyst"), [["x"]], "roles.analyst[0]"),
    (("tools", "calculator"), 5, "tools.calculator"),
    (("providers", "block"), [1], "providers.block[0]"),
    (("version",), True, "version"),
    (("version",), 1.0, "version"),
    (("base",), ["standard"], "base"),
]


def replace(document: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target: Any = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


@pytest.mark.parametrize(("path", "value", "named"), FINDINGS, ids=[f[2] for f in FINDINGS])
def test_malformed_values_are_policy_file_errors_naming_the_key(path: Any, value: Any, named: str) -> None:
    """Regression (finding 9): these raised TypeError (or were accepted and failed on a call)."""
    with pytest.raises(PolicyFileError) as info:
        policy_from_mapping(replace(base_document(), path, value), source=SOURCE)
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: ") and named in message


def test_a_url_in_url_env_is_refused_unechoed() -> None:
    """A database URL written where the variable's name belongs never reaches the message."""
    sink = {"type": "postgres", "url_env": "postgresql://u:hunter2@db/audit"}
    with pytest.raises(PolicyFileError) as info:
        policy_from_mapping(replace(base_document(), ("audit", "sinks", 0), sink), source=SOURCE)
    assert "audit.sinks[0].url_env: takes the NAME of an environment variable" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_the_base_document_is_valid() -> None:
    policy = policy_from_mapping(base_document(), source=SOURCE)
    assert policy.governance["tools"] == {"calculator": {"precision": 3}}


def test_toolbox_check_prints_the_policy_file_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``toolbox check`` prints the message (exit 2), never "unexpected TypeError"."""
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    path = tmp_path / "policy.toml"
    path.write_text('version = 1\n[[guardrails.rules]]\nid = "R"\naction = ["DENY"]\n', encoding="utf-8")
    assert main(["check", "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert "guardrails.rules[0].action: must be a string, got an array" in err
    assert "unexpected" not in err


# -- tool options from the file ----------------------------------------------------------------


class Notes:
    """A tool that reads its options the way a careless provider might."""

    def __init__(self, runtime: Any) -> None:
        options = runtime.options or {}
        if "max_chars" in options and int(options["max_chars"]) < 1:  # a list here is a TypeError
            raise ValueError("invalid options for tool 'notes': max_chars must be positive")


NOTES = ToolProvider(
    tool_type=Notes,
    descriptor=ToolDescriptor(
        name="notes",
        version="1",
        risk=RiskClass.MEMORY_ONLY,
        operations=(OperationDescriptor(name="read", effect=Effect.READ_ONLY),),
    ),
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "tools.notes: invalid options for tool 'notes': max_chars must be positive"),
        ('["secret-ish"]', "tools.notes: TypeError"),
    ],
)
def test_tool_options_from_the_file_fail_as_policy_file_errors(
    tmp_path: Path, value: str, message: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(f"version = 1\n[tools.notes]\nmax_chars = {value}\n", encoding="utf-8")
    tools = Tools.load(
        test_context(), policy=ToolPolicy.from_file(path), providers=[NOTES], discover=False, env={}
    )
    with pytest.raises(PolicyFileError) as info:
        tools.get(Notes)
    assert str(info.value) == f"{path}: {message}"
    assert "secret-ish" not in str(info.value)


def test_tool_options_from_code_keep_the_providers_error() -> None:
    tools = Tools.load(
        test_context(), providers=[NOTES], discover=False, env={}, options={"notes": {"max_chars": 0}}
    )
    with pytest.raises(ValueError, match="max_chars must be positive") as info:
        tools.get(Notes)
    assert not isinstance(info.value, PolicyFileError)


# -- property: any TOML value at any key -------------------------------------------------------

PATHS: list[tuple[str | int, ...]] = [
    ("version",),
    ("base",),
    ("allow",),
    ("allow", "tools"),
    ("allow", "risks"),
    ("allow", "other"),
    ("deny", "tools"),
    ("deny", "risks"),
    ("providers",),
    ("providers", "block"),
    ("roles",),
    ("roles", "analyst"),
    ("roles", "auditor"),
    ("guardrails",),
    ("guardrails", "mode"),
    ("guardrails", "rules"),
    ("guardrails", "rules", 0),
    ("guardrails", "rules", 0, "id"),
    ("guardrails", "rules", 0, "action"),
    ("guardrails", "rules", 0, "tool"),
    ("guardrails", "rules", 0, "argument"),
    ("guardrails", "rules", 0, "in"),
    ("guardrails", "rules", 0, "greater_than"),
    ("audit",),
    ("audit", "mode"),
    ("audit", "fallback"),
    ("audit", "payload"),
    ("audit", "max_summary"),
    ("audit", "redact_keys"),
    ("audit", "auditor_roles"),
    ("audit", "queue_size"),
    ("audit", "sinks"),
    ("audit", "sinks", 0),
    ("audit", "sinks", 0, "type"),
    ("audit", "sinks", 0, "path"),
    ("tools",),
    ("tools", "calculator"),
    ("tools", "http"),
    ("extra",),
]
_KEYS = st.sampled_from(["tools", "risks", "type", "id", "x", "Bad Name", ""]) | st.text(max_size=6)
TOML_VALUES = st.recursive(
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["EXTERNAL_RESOURCE", "PRIVILEGED", "MEMORY_ONLY", "http", "fs", "DENY", "memory"])
    | st.datetimes()
    | st.dates(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=12,
)
PROBES = [
    ToolDescriptor(name=name, version="1", risk=risk, operations=[{"name": "run"}])
    for name in ("calculator", "http", "fs", "notes")
    for risk in RiskClass
]


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


@given(path=st.sampled_from(PATHS), value=TOML_VALUES)
def test_any_toml_value_at_any_key(path: tuple[str | int, ...], value: object) -> None:
    """A PolicyFileError naming the key path, or a policy allowing nothing more than the file says."""
    document = replace(base_document(), path, value)
    try:
        policy = policy_from_mapping(document, source=SOURCE)
    except PolicyFileError as exc:
        message = str(exc)
        assert message.startswith(f"{SOURCE}: ")
        assert str(path[0]) in message or "listed under both" in message
        return
    allow = document.get("allow") or {}
    base = document.get("base", "standard")
    for probe in PROBES:
        if policy.decide(probe).allowed:
            assert (
                probe.name in _list(allow.get("tools"))
                or probe.risk.value in _list(allow.get("risks"))
                or (probe.risk is RiskClass.MEMORY_ONLY and base == "standard")
            )


def test_nan_and_infinity_in_a_predicate_are_refused() -> None:
    for number in (math.nan, math.inf):
        rule = {"id": "R", "action": "DENY", "argument": "a", "greater_than": number}
        with pytest.raises(PolicyFileError, match=r"guardrails.rules\[0\].greater_than"):
            policy_from_mapping(replace(base_document(), ("guardrails", "rules", 0), rule), source=SOURCE)


# -- the reader itself -------------------------------------------------------------------------


def test_table_reader_names_types_not_values() -> None:
    from toolbox.foundations._table_reader import TableReader

    table = TableReader({"n": True, "s": "x", "f": math.inf, "a": ["ok", ""]}, source=SOURCE, path="t")
    with pytest.raises(PolicyFileError, match=r"^policy.toml: t.n: must be an integer, got a boolean$"):
        table.integer("n")
    with pytest.raises(PolicyFileError, match=r"^policy.toml: t.f: must be a finite number$"):
        table.number("f")
    with pytest.raises(PolicyFileError, match=r"^policy.toml: t.a\[1\]: must not be empty$"):
        table.strings("a")
    with pytest.raises(PolicyFileError, match=r"^policy.toml: t.missing: missing$"):
        table.string("missing")
    with pytest.raises(PolicyFileError, match=r"^policy.toml: t.s: must be a table, got a string$"):
        table.table("s")
    assert table.string("s") == "x" and table.boolean("absent", False) is False
