"""The agent-framework and raw-API examples run offline and show what they promise.

They run in this process (``runpy``), as ``python examples/NAME`` would run them; the mypy step of
scripts/test type-checks them (``examples`` is in ``[tool.mypy].files``).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
AUDITED = [
    "audit: shop.wipe DENIED",
    "audit: shop.refund APPROVAL_REQUIRED",
    "audit: shop.refund SUCCESS",
]


def run(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("openai_agents_agent.py", ["final: Refunded 5 on o-7."]),
        (
            "langchain_agent.py",
            ['shop__wipe: error {"status": "DENIED"', "shop__refund approved: success refunded 5"],
        ),
        ("raw_openai_loop.py", ['"field_path": "a"', "shop__refund: refunded 5 on o-7", "final: Refunded 5"]),
        ("raw_anthropic_loop.py", ['error=True {"status": "INVALID_ARGUMENTS"', "final: Refunded 5"]),
    ],
)
def test_example_runs_offline(name, shown, capsys):
    out = run(name, capsys)
    assert "approval needed: shop.refund {'order': 'o-7', 'amount': 5}" in out or "langchain" in name
    for line in [*shown, *AUDITED]:
        assert line in out, f"{name}: {line!r} missing from\n{out}"
    # Each refund ran once, after the approval; the wipe never ran.
    assert out.count("audit: shop.refund SUCCESS") == 1
    assert "wiped" not in out
