"""The agent-framework and raw-API examples run offline and show what they promise; they type-check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
AUDITED = [
    "audit: shop.wipe DENIED",
    "audit: shop.refund APPROVAL_REQUIRED",
    "audit: shop.refund SUCCESS",
]


def run(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


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
def test_example_runs_offline(name, shown):
    out = run(name)
    assert "approval needed: shop.refund {'order': 'o-7', 'amount': 5}" in out or "langchain" in name
    for line in [*shown, *AUDITED]:
        assert line in out, f"{name}: {line!r} missing from\n{out}"
    # Each refund ran once, after the approval; the wipe never ran.
    assert out.count("audit: shop.refund SUCCESS") == 1
    assert "wiped" not in out


def test_examples_type_check(tmp_path):
    names = ["openai_agents_agent.py", "langchain_agent.py", "raw_openai_loop.py", "raw_anthropic_loop.py"]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *names],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
