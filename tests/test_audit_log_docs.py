"""The verification script of docs/audit-verify.md, run outside toolbox (its own process, hashlib and
cryptography only) on a proof `toolbox audit prove` printed: it accepts it, and refuses it altered."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit_log_support import at
from toolbox.audit import SqliteSink
from toolbox.cli import main

DOCS = Path(__file__).resolve().parent.parent / "docs" / "audit-verify.md"


def _script() -> str:
    found = re.search(r"```python\n(# check_proof\.py.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/audit-verify.md has no check_proof.py block"
    return found.group(1)


def _run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", _script()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_documented_script_checks_a_real_proof(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    imports = set(re.findall(r"^(?:from|import) (\w+)", script, re.M))
    assert imports == {"base64", "hashlib", "json", "cryptography"}
    assert len(script.splitlines()) <= 55
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([at(i, f"t{i % 3}") for i in range(11)])
    assert main(["audit", "keygen", str(tmp_path / "log.key"), "--name", "audit-log"]) == 0
    common = ["--sqlite", str(tmp_path / "audit.db"), "--origin", "audit.example.com/prod"]
    key = ["--key", str(tmp_path / "log.key"), "--key-name", "audit-log"]
    assert main(["audit", "checkpoint", *common, *key, "--witness-dir", str(tmp_path / "w")]) == 0
    event = sink.read_trace("t2")[1]
    capsys.readouterr()
    assert main(["audit", "prove", "--sqlite", str(tmp_path / "audit.db"), event.event_id]) == 0
    proof = capsys.readouterr().out
    (tmp_path / "proof.json").write_text(proof)
    done = _run(tmp_path)
    index = json.loads(proof)["log_index"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"entry {index} of audit.example.com/prod's tree of 11: included"

    def refused(document: dict[str, object], reason: str) -> None:
        (tmp_path / "proof.json").write_text(json.dumps(document))
        result = _run(tmp_path)
        assert result.returncode == 1 and reason in result.stderr, result.stderr

    original = json.loads(proof)
    refused(
        {**original, "event_text": original["event_text"].replace("calc", "calx")}, "the event was edited"
    )
    refused({**original, "log_index": (index + 1) % 11}, "not in the signed tree")
    refused(
        {**original, "checkpoint": original["checkpoint"].replace("\n11\n", "\n12\n")}, "InvalidSignature"
    )
    other = dict(original)
    other["inclusion_path"] = original["inclusion_path"][:-1]
    refused(other, "not in the signed tree")
