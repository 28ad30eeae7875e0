"""Guardrails: ordered rules that deny, warn about, or hold for approval a matching call.

Rules are checked in order. The first DENY stops the call
(DENIED/GUARDRAIL_<rule-id>); WARN lets it run and puts the warning in the
result and the record; REQUIRE_APPROVAL turns the call into an
argument-bound approval request. Unknown actions or modes are configuration
errors at load time, never skipped.
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from toolbox.errors import ConfigurationError, PolicyFileError
from toolbox.foundations._table_reader import TableReader, toml_type
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._result import ToolResult

__all__ = ["Guardrail", "GuardrailAction", "GuardrailMode", "Guardrails", "guardrails_from_config"]

_RULE_ID = re.compile(r"^[A-Z0-9][A-Z0-9_]{0,63}$")


class GuardrailAction(str, enum.Enum):
    """What a matching rule does."""

    DENY = "DENY"
    WARN = "WARN"
    REQUIRE_APPROVAL = "REQUIRE_APPROVAL"


class GuardrailMode(str, enum.Enum):
    """``ENFORCE`` applies actions; ``REPORT`` turns DENY into WARN, for roll-out."""

    ENFORCE = "ENFORCE"
    REPORT = "REPORT"


ArgumentPredicate = Callable[[Mapping[str, Any]], bool]


@final
@dataclass(frozen=True)
class Guardrail:
    """One rule. ``tool`` and ``operation`` are glob patterns; ``when`` tests the arguments."""

    id: str
    """Upper-case id; a denial's reason code is ``GUARDRAIL_<id>``."""
    action: GuardrailAction
    tool: str = "*"
    operation: str = "*"
    when: ArgumentPredicate | None = None
    message: str = ""
    report_only: bool = False
    """Warn instead of denying (set for the rules of a policy file in REPORT mode)."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _RULE_ID.match(self.id):
            raise ConfigurationError(f"guardrail id {self.id!r} must match {_RULE_ID.pattern}")
        if not isinstance(self.action, GuardrailAction):
            raise ConfigurationError(
                f"guardrail {self.id}: unknown action {self.action!r}; use one of "
                f"{', '.join(a.value for a in GuardrailAction)}"
            )

    def matches(self, invocation: Invocation) -> bool:
        """Whether this rule applies to ``invocation``."""
        return (
            fnmatch.fnmatchcase(invocation.tool, self.tool)
            and fnmatch.fnmatchcase(invocation.operation, self.operation)
            and (self.when is None or bool(self.when(invocation.arguments)))
        )


@final
class Guardrails:
    """The guardrail step of the chain."""

    name = "guardrails"
    per_attempt = False
    __slots__ = ("_mode", "_rules")

    def applies(self, invocation: Invocation) -> bool:
        """Whether any rule can match this tool and operation (its predicate aside)."""
        return any(self.could_match(rule, invocation) for rule in self._rules)

    @staticmethod
    def could_match(rule: Guardrail, invocation: Invocation) -> bool:
        """Whether ``rule``'s tool and operation patterns match ``invocation``."""
        return fnmatch.fnmatchcase(invocation.tool, rule.tool) and fnmatch.fnmatchcase(
            invocation.operation, rule.operation
        )

    @property
    def rules(self) -> tuple[Guardrail, ...]:
        """The rules, in order."""
        return self._rules

    @property
    def mode(self) -> GuardrailMode:
        """ENFORCE or REPORT."""
        return self._mode

    def __init__(
        self, rules: Sequence[Guardrail], *, mode: GuardrailMode | str = GuardrailMode.ENFORCE
    ) -> None:
        try:
            self._mode = GuardrailMode(mode)
        except ValueError:
            raise ConfigurationError(f"unknown guardrail mode {mode!r}; use ENFORCE or REPORT") from None
        seen: set[str] = set()
        for rule in rules:
            if not isinstance(rule, Guardrail):
                raise ConfigurationError(f"guardrails must be Guardrail objects, got {type(rule).__name__}")
            if rule.id in seen:
                raise ConfigurationError(f"guardrail id {rule.id} is used twice")
            seen.add(rule.id)
        self._rules = tuple(rules)

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        for rule in self._rules:
            if not rule.matches(invocation):
                continue
            action = rule.action
            if action is GuardrailAction.DENY and (self._mode is GuardrailMode.REPORT or rule.report_only):
                action = GuardrailAction.WARN
            text = rule.message or f"guardrail {rule.id} matched {invocation.tool}.{invocation.operation}"
            if action is GuardrailAction.DENY:
                return invocation.denied(f"GUARDRAIL_{rule.id}", f"guardrail:{rule.id}", text)
            if action is GuardrailAction.WARN:
                invocation.warnings = (*invocation.warnings, f"GUARDRAIL_{rule.id}: {text}")
            else:
                invocation.approval_rules = (*invocation.approval_rules, rule.id)
        return None


_PREDICATES: dict[str, Callable[[Any, Any], bool]] = {
    "equals": lambda value, expected: value == expected,
    "in": lambda value, expected: value in expected,
    "matches": lambda value, expected: isinstance(value, str) and re.search(expected, value) is not None,
    "greater_than": lambda value, expected: _is_number(value) and value > expected,
    "less_than": lambda value, expected: _is_number(value) and value < expected,
}
_RULE_KEYS = frozenset({"id", "action", "tool", "operation", "message", "argument", *_PREDICATES})


_MISSING = object()


def _lookup(arguments: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = arguments
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _argument_path(rule: TableReader) -> tuple[str, ...]:
    """A string names a top-level argument; an array is a path into nested ones (["headers", "x-pay-to"])."""
    argument = rule.value("argument")
    path = (argument,) if isinstance(argument, str) else argument
    if (
        not isinstance(path, (tuple, list))
        or not path
        or not all(isinstance(key, str) and key for key in path)
    ):
        raise rule.error(
            "argument", f"must be a name, or a list of names for a nested value; got {toml_type(argument)}"
        )
    return tuple(path)


def _expected(rule: TableReader, test_name: str) -> Any:
    """The value a predicate compares with, checked for the test's type."""
    if test_name == "in":
        value = rule.value("in")
        if not isinstance(value, (list, tuple)):
            raise rule.error("in", f"must be an array, got {toml_type(value)}")
        return value
    if test_name in ("greater_than", "less_than"):
        return rule.number(test_name)
    if test_name == "matches":
        pattern = rule.string("matches")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise rule.error("matches", f"invalid regular expression ({exc})") from None
        return pattern
    return rule.value(test_name)


def _predicate(rule: TableReader) -> ArgumentPredicate | None:
    tests = [k for k in _PREDICATES if k in rule]
    if "argument" not in rule and not tests:
        return None
    if len(tests) != 1:
        raise rule.error("", f"give 'argument' and exactly one of {', '.join(_PREDICATES)}")
    keys = _argument_path(rule)
    test_name = tests[0]
    expected = _expected(rule, test_name)
    test = _PREDICATES[test_name]

    def predicate(arguments: Mapping[str, Any]) -> bool:
        value = _lookup(arguments, keys)
        if value is _MISSING:
            return False
        # A list also matches when one of its items does: a repeated query parameter cannot hide a value.
        return bool(test(value, expected)) or (
            isinstance(value, list) and any(test(item, expected) for item in value)
        )

    return predicate


def guardrails_from_config(config: Mapping[str, Any], *, source: str = "configuration") -> Guardrails:
    """Build `Guardrails` from ``{"mode": "ENFORCE", "rules": [{...}, ...]}``.

    Each rule: ``id``, ``action`` (DENY, WARN, REQUIRE_APPROVAL), optional
    ``tool``, ``operation``, ``message``, and an optional predicate ``argument``
    (a name, or a list of names: a path to a nested value) plus one of
    ``equals``, ``in``, ``matches``, ``greater_than``, ``less_than``; a list
    value matches when it, or any of its items, passes the test.

    Raises:
        PolicyFileError: (a `ConfigurationError`) an unknown key, action or mode, or a
            value of the wrong type, naming its key path.
    """
    table = TableReader(config, source=source, path="guardrails")
    table.only({"mode", "rules"})
    rules = []
    for spec in table.tables("rules"):
        spec.only(_RULE_KEYS)
        action = spec.string("action", choices=GuardrailAction._value2member_map_, what="action")
        rule_id = spec.string("id")
        try:
            rules.append(
                Guardrail(
                    id=rule_id,
                    action=GuardrailAction(action),
                    tool=spec.string("tool", "*"),
                    operation=spec.string("operation", "*"),
                    when=_predicate(spec),
                    message=spec.string("message", ""),
                )
            )
        except ConfigurationError as exc:
            if isinstance(exc, PolicyFileError):
                raise
            raise spec.error("", str(exc)) from None
    mode = table.string(
        "mode", GuardrailMode.ENFORCE.value, choices=GuardrailMode._value2member_map_, what="guardrail mode"
    )
    try:
        checked = Guardrails(rules, mode=mode)
    except ConfigurationError as exc:
        raise table.error("", str(exc)) from None
    if checked.mode is GuardrailMode.REPORT:
        return Guardrails([dataclasses.replace(r, report_only=True) for r in rules])
    return checked
