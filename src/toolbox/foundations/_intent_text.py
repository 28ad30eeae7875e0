"""What makes an intent text valid: the one check both front doors and the chain share.

A foundation module: the intent phase (`toolbox.registry._intent`), the chain's argument
validation and the by-name door all check declared texts with it, so none of
them has to import another for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolbox.foundations._descriptor import Effect
from toolbox.foundations._line_text import breaks_line

__all__ = ["MAX_INTENT_LENGTH", "VALID_TEXTS", "declared_intent", "intent_field_for", "validate_intent_text"]

MAX_INTENT_LENGTH = 1000
#: Texts already found valid: they are usually literals repeated on every call.
VALID_TEXTS: dict[str, None] = {}
_VALID_TEXTS_MAX = 4096


def intent_field_for(effect: Effect) -> str:
    """The argument a by-name call states its intent in: ``purpose`` when ``READ_ONLY``, else ``audit_as``."""
    return "purpose" if effect is Effect.READ_ONLY else "audit_as"


def validate_intent_text(text: object) -> str:
    """Return ``text`` if it is a valid intent text, else raise `ValueError`.

    Valid: a string, non-empty after stripping, at most 1000 characters, one line:
    no control character, line or paragraph separator or bidirectional control
    (`toolbox.foundations._line_text`).
    """
    if type(text) is str and text in VALID_TEXTS:
        return text
    if not isinstance(text, str):
        raise ValueError(f"intent text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("intent text is empty: say why this call is made, e.g. 'Fetch rates'")
    if len(text) > MAX_INTENT_LENGTH:
        raise ValueError(f"intent text is {len(text)} characters; shorten it to at most {MAX_INTENT_LENGTH}")
    if breaks_line(text):
        raise ValueError(
            "intent text contains control characters, line separators or bidirectional controls; "
            "use a single plain line"
        )
    if len(VALID_TEXTS) < _VALID_TEXTS_MAX:
        VALID_TEXTS[text] = None
    return text


def declared_intent(arguments: object, field: str) -> str:
    """The intent text by-name ``arguments`` declare in ``field``, or "" when it is missing or invalid.

    What a by-name call's trace record starts with, before its arguments are validated.
    """
    text = arguments.get(field) if isinstance(arguments, Mapping) else None
    try:
        return validate_intent_text(text)
    except ValueError:
        return ""
