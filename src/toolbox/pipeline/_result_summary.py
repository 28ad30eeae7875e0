"""Results that summarise themselves for the audit trail, instead of being stored.

A result object may define ``__toolbox_audit_summary__(self) -> (summary,
sha256)``: a short text of counts (never a value) and a hash of the content.
The audit trail stores both in the call's INVOCATION_RESPONSE event
(``payload_summary`` and ``payload_hash``, under its payload mode), so the
record shows how much came back and can prove what it was, while the rows
themselves are stored nowhere. toolbox-sql's ``SqlResult`` is one.

The typed door's inline path records the summary itself when the result is
not transient (`inline_summary`); the by-name routes do not: a call that
returns such a result continues in the full chain, whose audit hook records
it (`settled_inline`).
"""

from __future__ import annotations

from toolbox.pipeline._retry import is_transient_result

__all__ = ["PLAIN_RESULTS", "inline_summary", "result_summary", "settled_inline"]

#: Results of these types can neither declare themselves transient nor summarise themselves.
PLAIN_RESULTS = frozenset({int, float, str, bool, bytes, dict, list, tuple, type(None)})

_MAX_SUMMARY = 1000


def result_summary(content: object) -> tuple[str, str] | None:
    """``(summary, sha256)`` of a result that summarises itself, else None (a broken probe: None too)."""
    if type(content) in PLAIN_RESULTS:
        return None
    probe = getattr(type(content), "__toolbox_audit_summary__", None)
    if not callable(probe):
        return None
    try:
        summary, digest = probe(content)
    except Exception:  # noqa: BLE001 - a result that cannot summarise itself is recorded without one
        return None
    if not isinstance(summary, str) or not isinstance(digest, str):
        return None
    return summary[:_MAX_SUMMARY], digest[:128]


def settled_inline(content: object) -> bool:
    """Whether a fast path may finish a call that returned ``content`` itself.

    Not when the result is transient (the chain may retry it) or summarises
    itself for the audit trail (the chain's audit hook records the summary).
    """
    if type(content) in PLAIN_RESULTS:
        return True
    return not is_transient_result(content) and not callable(
        getattr(type(content), "__toolbox_audit_summary__", None)
    )


def inline_summary(content: object) -> tuple[str, str] | None:
    """The summary a fast path records itself for ``content``, which `settled_inline` did not settle.

    None when the chain must finish the call: the result is transient (the
    chain may retry it) or its summary cannot be taken (the chain records it
    without one).
    """
    if is_transient_result(content):
        return None
    return result_summary(content)
