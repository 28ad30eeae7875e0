"""What an approval request shows a person: the bound arguments, secrets masked, long values cut.

The masking is the audit trail's redaction, which `toolbox.Governance` installs
(`use_cleaner`; the chain never imports the audit package); until then every
value is masked. What is *bound* (the fingerprint) is never this copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, final

from toolbox.foundations._redact import MASK

__all__ = ["Cleaner", "MaskAll", "canonical_text", "shown_arguments", "use_cleaner"]

# Each shown value is cut past this many characters: enough for an approver to read a whole SQL
# statement (toolbox-sql), bounded so a huge argument cannot flood a request.
_MAX_SHOWN = 2000


class Cleaner(Protocol):
    """Masks the secrets in a value shown to a human (`toolbox.audit.Redaction` is one)."""

    def clean(self, value: object) -> object:
        """``value`` with its secrets masked."""


@final
class MaskAll:
    """Masks every value: what approval requests show until a redaction is installed."""

    __slots__ = ()

    def clean(self, value: object) -> object:
        """`MASK`, whatever ``value`` is."""
        return MASK


# The audit trail's redaction, which toolbox.governance installs (the chain never imports the
# audit package); until then every value is masked.
_cleaner: Cleaner = MaskAll()


def use_cleaner(cleaner: Cleaner) -> None:
    """Set how approval requests mask arguments; `toolbox.Governance` installs the audit trail's."""
    global _cleaner  # noqa: PLW0603 - installed once by the layer above, at import
    _cleaner = cleaner


def canonical_text(value: object) -> str:
    """Sorted, compact JSON (anything else by its repr): what is signed and what is cut for display."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr, ensure_ascii=False)


def shown_arguments(arguments: Mapping[str, Any], cleaner: Cleaner | None = None) -> dict[str, Any]:
    """``arguments`` as an approval request shows them (``cleaner``: the installed one by default)."""
    # The same redaction as the audit trail: nested secrets, URLs, forms and bearer strings are masked.
    cleaned = (cleaner or _cleaner).clean(dict(arguments))
    if not isinstance(cleaned, dict):
        return {key: MASK for key in arguments}
    return {key: _shorten(value) for key, value in cleaned.items()}


def _shorten(value: object) -> object:
    if isinstance(value, str):
        return value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN] + "..."
    if isinstance(value, (dict, list)):
        text = canonical_text(value)
        return value if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
    return value
