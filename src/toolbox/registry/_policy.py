"""`ToolPolicy`: which tools this process may use at all.

Precedence, highest first:

1. explicit deny (a tool, by type or name, or a whole risk class);
2. explicit allow (likewise);
3. the risk-class default (`ToolPolicy.standard` allows ``MEMORY_ONLY``);
4. deny.

An allow never waives a tool's deployment acknowledgement. Every decision
carries a stable reason code and the rule that produced it.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from toolbox.errors import PolicyFileError
from toolbox.foundations._descriptor import MAX_NAME_LENGTH, TOOL_NAME_PATTERN, RiskClass, ToolDescriptor

__all__ = ["PolicyDecision", "ReasonCode", "ToolPolicy", "install_file_reader"]

# The policy file reader validates the file's governance tables too (roles, guardrails,
# audit), so it sits above the chain and the audit trail: `toolbox.governance._policy_file` installs
# itself here when `toolbox` is imported, and this module never imports it.
_read_file: Callable[[Path], ToolPolicy] | None = None


def install_file_reader(reader: Callable[[Path], ToolPolicy]) -> None:
    """Set what `ToolPolicy.from_file` calls (`toolbox.governance._policy_file` installs its reader)."""
    global _read_file  # noqa: PLW0603 - installed once by the layer above, at import
    _read_file = reader


class ReasonCode(str, enum.Enum):
    """Stable codes explaining why a tool is usable or not."""

    ALLOWED = "ALLOWED"
    POLICY_DENIED = "POLICY_DENIED"
    NOT_ACKNOWLEDGED = "NOT_ACKNOWLEDGED"
    TOOL_UNAVAILABLE = "TOOL_UNAVAILABLE"


@final
@dataclass(frozen=True)
class PolicyDecision:
    """The policy's answer for one tool: ``allowed``, a reason code and the deciding rule."""

    allowed: bool
    reason_code: ReasonCode
    rule: str


ToolRef = type | str | RiskClass
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


def _describe_ref(ref: object) -> str:
    if isinstance(ref, type):
        return ref.__qualname__
    return ref.value if isinstance(ref, RiskClass) else str(ref)


@final
class ToolPolicy:
    """An immutable policy. Every modifier returns a new policy.

    Tools are named by type (``HttpTool``), by name (``"http"``) or selected by
    risk class (``RiskClass.EXTERNAL_RESOURCE``).
    """

    __slots__ = (
        "_allow_risks",
        "_allow_tools",
        "_blocked",
        "_default_risks",
        "_deny_risks",
        "_deny_tools",
        "_file_names",
        "_governance",
        "_source",
    )

    def __init__(
        self,
        *,
        default_risks: Iterable[RiskClass] = (),
        allow: Iterable[ToolRef] = (),
        deny: Iterable[ToolRef] = (),
        blocked_distributions: Iterable[str] = (),
        source: str | None = None,
        file_names: Mapping[str, str] | None = None,
        governance: Mapping[str, Any] | None = None,
    ) -> None:
        self._default_risks = frozenset(RiskClass(r) for r in default_risks)
        allow_tools, allow_risks = _split(allow, "allow")
        deny_tools, deny_risks = _split(deny, "deny")
        self._allow_tools = allow_tools
        self._allow_risks = allow_risks
        self._deny_tools = deny_tools
        self._deny_risks = deny_risks
        self._blocked = frozenset(_check_distribution(d) for d in blocked_distributions)
        #: Where the policy came from (a file path), for messages.
        self._source = source
        # Tool names read from a file, mapped to the key that named them.
        self._file_names: Mapping[str, str] = dict(file_names or {})
        # Roles and guardrails read from a policy file, applied by toolbox.Governance.
        self._governance: Mapping[str, Any] = dict(governance or {})

    # -- constructors -------------------------------------------------------

    @classmethod
    def standard(cls) -> ToolPolicy:
        """Allow ``MEMORY_ONLY`` tools; everything else needs an explicit allow."""
        return cls(default_risks=[RiskClass.MEMORY_ONLY])

    @classmethod
    def deny_all(cls) -> ToolPolicy:
        """Allow nothing unless explicitly allowed."""
        return cls()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ToolPolicy:
        """Read a TOML policy file (schema: docs/policy-file.md).

        Raises:
            PolicyFileError: the file is missing, not TOML, or breaks the schema;
                the message names the file and the key.
        """
        if _read_file is None:  # pragma: no cover - importing toolbox installs it
            raise RuntimeError("no policy file reader is installed; import toolbox.governance._policy_file")
        return _read_file(Path(path))

    def _replace(self, **changes: Any) -> ToolPolicy:
        fields: dict[str, Any] = {
            "default_risks": self._default_risks,
            "allow": [*self._allow_tools, *self._allow_risks],
            "deny": [*self._deny_tools, *self._deny_risks],
            "blocked_distributions": self._blocked,
            "source": self._source,
            "file_names": self._file_names,
            "governance": self._governance,
        }
        fields.update(changes)
        return ToolPolicy(**fields)

    # -- modifiers ------------------------------------------------------------

    def allow(self, *refs: ToolRef) -> ToolPolicy:
        """A new policy that also explicitly allows ``refs`` (types, names or risk classes)."""
        return self._replace(allow=[*self._allow_tools, *self._allow_risks, *refs])

    def deny(self, *refs: ToolRef) -> ToolPolicy:
        """A new policy that explicitly denies ``refs``; a deny beats any allow."""
        return self._replace(deny=[*self._deny_tools, *self._deny_risks, *refs])

    def block_distribution(self, *names: str) -> ToolPolicy:
        """A new policy that refuses to load provider distributions ``names`` at all.

        Blocked packages are not even imported.
        """
        return self._replace(blocked_distributions=self._blocked | set(names))

    # -- queries --------------------------------------------------------------

    @property
    def blocked_distributions(self) -> frozenset[str]:
        """Normalised names of provider distributions that are never loaded."""
        return self._blocked

    @property
    def governance(self) -> Mapping[str, Any]:
        """What the policy file configures beyond tools: ``roles``, ``guardrails``, ``audit``,
        ``tools`` (options) and ``cedar`` (the loaded `CedarAuthorizer`); validated when read."""
        return self._governance

    @property
    def source(self) -> str | None:
        """The file this policy was read from, if any."""
        return self._source

    def is_blocked(self, distribution: str) -> bool:
        """Whether provider distribution ``distribution`` is blocked."""
        return normalize_distribution(distribution) in self._blocked

    def decide(self, descriptor: ToolDescriptor, tool_type: type | None = None) -> PolicyDecision:
        """Decide whether the tool described by ``descriptor`` may be used."""
        name, risk = descriptor.name, descriptor.risk
        if name in self._deny_tools or (tool_type is not None and tool_type in self._deny_tools):
            return PolicyDecision(False, ReasonCode.POLICY_DENIED, f"deny:tool:{name}")
        if risk in self._deny_risks:
            return PolicyDecision(False, ReasonCode.POLICY_DENIED, f"deny:risk:{risk.value}")
        if name in self._allow_tools or (tool_type is not None and tool_type in self._allow_tools):
            return PolicyDecision(True, ReasonCode.ALLOWED, f"allow:tool:{name}")
        if risk in self._allow_risks:
            return PolicyDecision(True, ReasonCode.ALLOWED, f"allow:risk:{risk.value}")
        if risk in self._default_risks:
            return PolicyDecision(True, ReasonCode.ALLOWED, f"default:risk:{risk.value}")
        return PolicyDecision(False, ReasonCode.POLICY_DENIED, "default:deny")

    def check_known_tools(self, known: Iterable[str], *, explain: Callable[[str], str] | None = None) -> None:
        """Fail if a policy *file* names a tool nobody provides.

        ``explain(name)`` may add why the tool is missing (e.g. its provider
        failed to import); an empty string adds nothing.

        Raises:
            PolicyFileError: naming the file, the key and the unknown tool.
        """
        known_set = set(known)
        # [tools.<namespace>] may configure a family of tools (toolbox-mcp's [tools.mcp]).
        namespaces = {n[:i] for n in known_set for i, c in enumerate(n) if c == "."}
        for name, key in self._file_names.items():
            if name not in known_set and not (key == f"tools.{name}" and name in namespaces):
                available = ", ".join(sorted(known_set)) or "none"
                why = explain(name) if explain is not None else ""
                raise PolicyFileError(
                    f"{self._source}: {key}: unknown tool {name!r}; installed tools: {available}"
                    + (f"; {why}" if why else "")
                )

    def __repr__(self) -> str:
        parts = [f"default={sorted(r.value for r in self._default_risks)}"]
        for label, items in (
            ("allow", [*self._allow_tools, *self._allow_risks]),
            ("deny", [*self._deny_tools, *self._deny_risks]),
        ):
            if items:
                parts.append(f"{label}={sorted(_describe_ref(i) for i in items)}")
        if self._blocked:
            parts.append(f"blocked={sorted(self._blocked)}")
        return f"ToolPolicy({', '.join(parts)})"


def normalize_distribution(name: str) -> str:
    """Normalise a distribution name the way the package index does (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _check_distribution(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise PolicyFileError(f"a blocked distribution must be a non-empty name, got {name!r}")
    return normalize_distribution(name)


def _split(refs: Iterable[ToolRef], verb: str) -> tuple[frozenset[type | str], frozenset[RiskClass]]:
    tools: set[type | str] = set()
    risks: set[RiskClass] = set()
    for ref in refs:
        if isinstance(ref, RiskClass):
            risks.add(ref)
        elif isinstance(ref, type) or (
            isinstance(ref, str) and len(ref) <= MAX_NAME_LENGTH and _TOOL_NAME.fullmatch(ref)
        ):
            tools.add(ref)
        else:
            raise PolicyFileError(
                f"cannot {verb} {ref!r}: pass a tool type, a tool name matching "
                f"{TOOL_NAME_PATTERN} or a RiskClass"
            )
    return frozenset(tools), frozenset(risks)
