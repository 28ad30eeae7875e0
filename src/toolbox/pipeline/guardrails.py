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

from toolbox.errors import ConfigurationError
from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.result import ToolResult

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
    "greater_than": lambda value, expected: isinstance(value, (int, float)) and value > expected,
    "less_than": lambda value, expected: isinstance(value, (int, float)) and value < expected,
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


def _predicate(rule_id: str, spec: Mapping[str, Any]) -> ArgumentPredicate | None:
    argument = spec.get("argument")
    tests = [(k, spec[k]) for k in _PREDICATES if k in spec]
    if argument is None and not tests:
        return None
    # A string names a top-level argument; a list is a path into nested ones (["headers", "x-pay-to"]).
    path = (argument,) if isinstance(argument, str) else argument
    if (
        not isinstance(path, (tuple, list))
        or not path
        or not all(isinstance(key, str) for key in path)
        or len(tests) != 1
    ):
        raise ConfigurationError(
            f"guardrail {rule_id}: give 'argument' (a name, or a list of names for a nested value) "
            f"and exactly one of {', '.join(_PREDICATES)}"
        )
    test_name, expected = tests[0]
    if test_name == "matches":
        try:
            re.compile(expected)
        except (re.error, TypeError) as exc:
            raise ConfigurationError(f"guardrail {rule_id}: invalid regular expression ({exc})") from None
    test = _PREDICATES[test_name]
    keys = tuple(path)

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
        ConfigurationError: an unknown key, action or mode, naming the rule.
    """
    unknown = set(config) - {"mode", "rules"}
    if unknown:
        raise ConfigurationError(f"{source}: guardrails: unknown key(s) {', '.join(sorted(unknown))}")
    rules = []
    for index, spec in enumerate(config.get("rules", [])):
        where = f"{source}: guardrails.rules[{index}]"
        if not isinstance(spec, Mapping):
            raise ConfigurationError(f"{where}: must be a table")
        extra = set(spec) - _RULE_KEYS
        if extra:
            raise ConfigurationError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        action = spec.get("action")
        if action not in GuardrailAction._value2member_map_:
            raise ConfigurationError(
                f"{where}: unknown action {action!r}; "
                f"use one of {', '.join(a.value for a in GuardrailAction)}"
            )
        rule_id = spec.get("id")
        try:
            rules.append(
                Guardrail(
                    id=rule_id,  # type: ignore[arg-type]  # validated by Guardrail itself
                    action=GuardrailAction(action),
                    tool=str(spec.get("tool", "*")),
                    operation=str(spec.get("operation", "*")),
                    when=_predicate(str(rule_id), spec),
                    message=str(spec.get("message", "")),
                )
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    mode = config.get("mode", GuardrailMode.ENFORCE.value)
    try:
        checked = Guardrails(rules, mode=mode)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{source}: {exc}") from None
    if checked.mode is GuardrailMode.REPORT:
        return Guardrails([dataclasses.replace(r, report_only=True) for r in rules])
    return checked
