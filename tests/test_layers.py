"""The seams the import layers introduced: what a lower layer is handed by a higher one.

The chain never imports the audit package, the policy never imports its file
reader; each receives what it needs from the layer above. These tests attack
those hand-overs: a missing one fails closed, and a look-alike is not trusted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, ToolResult, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import RetryPolicy
from toolbox.pipeline._chain import Pipeline
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._outcomes import OutcomeMappers
from toolbox.pipeline.checks import _approval_display as approval
from toolbox.registry import _policy as policy_module

SECRETS = {"headers": {"Authorization": "Bearer abc"}, "url": "https://u:p@h/x?token=t", "n": "EUR"}


def test_approval_display_fails_closed_without_a_cleaner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the audit layer installs its redaction, an approval request masks every value."""
    monkeypatch.setattr(approval, "_cleaner", approval.MaskAll())
    shown = approval.shown_arguments(SECRETS)
    assert shown == dict.fromkeys(SECRETS, "[REDACTED]")
    assert "abc" not in repr(shown)
    assert "u:p" not in repr(shown)


def test_approval_display_fails_closed_on_a_cleaner_returning_no_mapping() -> None:
    """A cleaner that answers something other than a mapping never lets the raw arguments through."""

    class Odd:
        def clean(self, value: object) -> object:
            return "not a mapping"

    before = approval._cleaner
    approval.use_cleaner(Odd())
    try:
        assert approval.shown_arguments(SECRETS) == dict.fromkeys(SECRETS, "[REDACTED]")
    finally:
        approval.use_cleaner(before)


def test_importing_toolbox_installs_the_audit_redaction_for_approvals() -> None:
    """The installed cleaner is the audit trail's: nested secrets and URL credentials masked, rest kept."""
    shown = approval.shown_arguments(SECRETS)
    assert shown["headers"] == {"Authorization": "[REDACTED]"}
    assert shown["url"] == "https://h/x?token=[REDACTED]"
    assert shown["n"] == "EUR"


def test_from_file_without_an_installed_reader_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A policy never imports its file reader; without one, from_file refuses clearly."""
    path = tmp_path / "policy.toml"
    path.write_text("version = 1\n", encoding="utf-8")
    monkeypatch.setattr(policy_module, "_read_file", None)
    with pytest.raises(RuntimeError, match="no policy file reader is installed"):
        ToolPolicy.from_file(path)


def test_from_file_uses_the_installed_reader(tmp_path: Path) -> None:
    """Importing toolbox installs toolbox.governance._policy_file's reader (file errors name the file)."""
    path = tmp_path / "policy.toml"
    path.write_text('version = 1\nbase = "deny_all"\n', encoding="utf-8")
    assert ToolPolicy.from_file(path).source == str(path)


class LookAlike:
    """An application hook with the audit trail's recording methods, but not the audit trail."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        self.seen.append("request")
        return None

    def on_response(self, invocation: Invocation, result: ToolResult) -> None:
        self.seen.append(f"response:{result.status.value}")

    def subject_of(self, *fields: Any) -> Any:
        self.seen.append("subject_of")

    def open_call(self, *args: Any) -> Any:
        self.seen.append("open_call")
        return object()

    def close_call(self, *args: Any) -> bool:
        self.seen.append("close_call")
        return True


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_look_alike_hook_is_not_trusted_to_record_the_fast_path() -> None:
    """Only the audit trail itself records typed fast-path calls; any other hook sees every call."""
    hook = LookAlike()
    gateway = Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit_hooks=[hook]))
    assert gateway.catalog.pipeline.hooks == (hook,)
    bound = gateway.tools_for(ExecutionContext(tenant="t", principal="p")).get(add)
    assert bound.call(1, 2).purpose("Sum").execute() == 3
    assert bound.call(2, 2).purpose("Sum").execute() == 4
    assert hook.seen == ["request", "response:SUCCESS"] * 2


class TrailSubclass(AuditTrail):
    """A subclass may change what the trail does on a request: it gets every call through its hooks."""

    def __init__(self) -> None:
        super().__init__(MemorySink())
        self.requests = 0

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        self.requests += 1
        return super().on_request(invocation)


def test_a_trail_subclass_is_called_through_its_hooks() -> None:
    """The fast path records through the exact AuditTrail only, as before the layers."""
    trail = TrailSubclass()
    gateway = Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))
    bound = gateway.tools_for(ExecutionContext(tenant="t", principal="p")).get(add)
    for _ in range(3):
        assert bound.call(1, 2).purpose("Sum").execute() == 3
    assert trail.requests == 3


def test_a_recorder_that_is_not_the_only_hook_is_ignored() -> None:
    """Pipeline(recorder=...) is honoured only when the recorder is the one hook it was given."""
    trail = AuditTrail(MemorySink())
    other = LookAlike()
    mixed = Pipeline(
        [],
        retry=RetryPolicy(),
        reconcilers={},
        mappers=OutcomeMappers({}),
        timeouts={},
        hooks=(trail, other),
        recorder=trail,
    )
    stranger = Pipeline(
        [],
        retry=RetryPolicy(),
        reconcilers={},
        mappers=OutcomeMappers({}),
        timeouts={},
        hooks=(other,),
        recorder=trail,
    )
    alone = Pipeline(
        [],
        retry=RetryPolicy(),
        reconcilers={},
        mappers=OutcomeMappers({}),
        timeouts={},
        hooks=(trail,),
        recorder=trail,
    )
    assert mixed.recorder is None
    assert stranger.recorder is None
    assert alone.recorder is trail


class Counting:
    """An application interceptor the fast paths do not know: it must see every call."""

    name = "counting"
    per_attempt = False

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        self.calls += 1
        return None


def test_an_unknown_interceptor_keeps_both_doors_on_the_full_chain() -> None:
    """toolbox.pipeline._paths takes a fast path only over checks it knows; yours runs on every call."""
    check = Counting()
    trail = AuditTrail(MemorySink())
    gateway = Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=trail, interceptors=[check])
    )
    context = ExecutionContext(tenant="t", principal="p")
    bound = gateway.tools_for(context).get(add)
    for _ in range(3):
        assert bound.call(1, 2).purpose("Sum").execute() == 3
        result = gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=context)
        assert result.content == 3
    assert check.calls == 6
    assert gateway._routes == {"add": None}


_ROOT = Path(__file__).resolve().parent.parent
_PRIVATE_CONTRACT = "Providers and integrations import no private toolbox module"


def _modules_under(package_dir: Path, prefix: str) -> list[str]:
    names = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = [prefix, *path.relative_to(package_dir).with_suffix("").parts]
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def test_the_private_module_contract_covers_every_private_module() -> None:
    """import-linter has no ``_*`` wildcard: the contract lists the private modules; this keeps it whole."""
    import tomllib

    contracts = tomllib.loads((_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == _PRIVATE_CONTRACT]
    forbidden = set(contract["forbidden_modules"])
    modules = _modules_under(_ROOT / "src" / "toolbox", "toolbox")
    assert forbidden <= set(modules), forbidden - set(modules)
    covered = {m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)}
    # An integration may use its own package's private helpers (toolbox.integrations._offered).
    private = {m for m in modules if _is_private(m) and not m.startswith("toolbox.integrations.")}
    assert private <= covered, sorted(private - covered)
    # Wholly covered packages hold nothing public.
    for package in {"toolbox.foundations", "toolbox.registry"} & forbidden:
        assert all(_is_private(m) for m in modules if m.startswith(package + ".")), package


def test_examples_import_only_public_modules() -> None:
    """Examples are what users copy: they use toolbox's public modules, like the providers (contract)."""
    import ast

    for path in sorted((_ROOT / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.split(".")[0] == "toolbox":
                    assert not _is_private(name), f"{path.name} imports {name}"


def test_ls_src_toolbox_draws_the_layers() -> None:
    """One package per layer; no module prefix stands in for a package (no cli_*.py family)."""
    top = sorted(p.name for p in (_ROOT / "src" / "toolbox").iterdir() if p.name != "__pycache__")
    assert top == [
        "__init__.py",
        "_legacy.py",
        "audit",
        "auth",
        "cli",
        "doors",
        "errors.py",
        "foundations",
        "governance",
        "integrations",
        "mcp",
        "pipeline",
        "provider.py",
        "py.typed",
        "registry",
        "service",
        "state",
        "testing",
    ]
    toolsets = [p for p in (_ROOT / "src" / "toolbox").rglob("*toolsets*.py")]
    assert [p.name for p in toolsets] == ["_toolsets.py"]  # one toolsets module


_OPTIONAL = (
    "mcp",
    "fastapi",
    "starlette",
    "sqlalchemy",
    "redis",
    "opentelemetry",
    "cedarpy",
    "jwt",
    "psycopg",
)
_PACKAGES = [
    "toolbox",
    "toolbox.audit",
    "toolbox.audit.sinks",
    "toolbox.auth",
    "toolbox.cli",
    "toolbox.doors",
    "toolbox.foundations",
    "toolbox.governance",
    "toolbox.integrations",
    "toolbox.pipeline",
    "toolbox.pipeline.checks",
    "toolbox.provider",
    "toolbox.registry",
    "toolbox.state",
    "toolbox.testing",
]


def test_every_package_init_is_cheap_to_import() -> None:
    """No package's __init__ imports an optional extra: those load in the outer rooms, when used."""
    import subprocess
    import sys

    code = (
        "import importlib, sys\n"
        f"for name in {_PACKAGES!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {_OPTIONAL!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
