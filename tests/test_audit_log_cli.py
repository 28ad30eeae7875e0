"""``toolbox audit keygen|checkpoint|prove|check-proof|consistency`` and ``verify --public-key``, end to end
on a SQLite store, with a directory witness and a SQL witness; and the documented script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit_log_support import at, rewrite_trace
from audit_sql_support import Store
from toolbox.audit import SqliteSink
from toolbox.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def setup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    db = tmp_path / "audit.db"
    sink = SqliteSink(db)
    sink.append([at(i, "a") for i in range(3)])
    sink.append([at(10, "b")])
    status, out, _ = run(capsys, "audit", "keygen", tmp_path / "log.key", "--name", "audit-log")
    assert status == 0 and out.startswith("audit-log+")
    assert (tmp_path / "log.key").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("WITNESS_URL", f"sqlite:///{tmp_path / 'witness.db'}")
    common = ["--sqlite", db, "--origin", "audit.example.com/prod"]
    witnesses = ["--witness-dir", tmp_path / "witness", "--witness-url-env", "WITNESS_URL"]
    return {"db": db, "sink": sink, "common": common, "witnesses": witnesses, "dir": tmp_path}


def _checkpoint(capsys: pytest.CaptureFixture[str], setup: dict[str, Any]) -> str:
    d = setup["dir"]
    status, out, err = run(
        capsys,
        "audit",
        "checkpoint",
        *setup["common"],
        "--key",
        d / "log.key",
        "--key-name",
        "audit-log",
        *setup["witnesses"],
    )
    assert status == 0, err
    return out


def test_keygen_never_overwrites_a_key(capsys: pytest.CaptureFixture[str], setup: dict[str, Any]) -> None:
    before = (setup["dir"] / "log.key").read_bytes()
    status, _, err = run(capsys, "audit", "keygen", setup["dir"] / "log.key", "--name", "audit-log")
    assert status == 2 and "never overwritten" in err
    assert (setup["dir"] / "log.key").read_bytes() == before


def test_checkpoint_prove_check_proof_and_verify(
    capsys: pytest.CaptureFixture[str], setup: dict[str, Any]
) -> None:
    d = setup["dir"]
    note = _checkpoint(capsys, setup)
    assert note.splitlines()[:2] == ["audit.example.com/prod", "4"]
    assert len(list((d / "witness").iterdir())) == 1
    event_id = setup["sink"].read_trace("a")[1].event_id
    status, proof, _ = run(capsys, "audit", "prove", "--sqlite", setup["db"], event_id)
    assert status == 0 and json.loads(proof)["tree_size"] == 4
    (d / "proof.json").write_text(proof)
    status, out, _ = run(capsys, "audit", "check-proof", d / "proof.json", "--public-key", d / "log.key.pub")
    assert status == 0 and out.startswith(f"OK: event {event_id} (trace a #2) is entry 1 of")
    verify = ["audit", "verify", *setup["common"], *setup["witnesses"], "--public-key", d / "log.key.pub"]
    status, out, _ = run(capsys, *verify)
    assert status == 0 and "the log matches every witnessed checkpoint" in out

    # The proof edited: refused, without the database.
    document = json.loads(proof)
    document["event"]["decision"] = "ALLOW"
    (d / "edited.json").write_text(json.dumps(document))
    status, out, _ = run(capsys, "audit", "check-proof", d / "edited.json", "--public-key", d / "log.key.pub")
    assert status == 1 and out.startswith("FAILED: the event does not give the hash")
    document = json.loads(proof)
    document["log_index"] = 2
    (d / "moved.json").write_text(json.dumps(document))
    status, out, _ = run(capsys, "audit", "check-proof", d / "moved.json", "--public-key", d / "log.key.pub")
    assert status == 1 and "not at log index 2" in out
    nested = "[" * 100_000 + "]" * 100_000
    no_fields = json.dumps({**json.loads(proof), "event": {"event_id": "x"}})
    odd_values = json.dumps(
        {**json.loads(proof), "event": {**json.loads(proof)["event"], "rule_ids": {"a": [1]}}}
    )
    junk_documents = ["{}", "[]", "nope", nested, no_fields, odd_values]
    for junk in [*junk_documents, json.dumps({**json.loads(proof), "inclusion_path": ["%%"]})]:
        (d / "junk.json").write_text(junk)
        status, out, _ = run(
            capsys, "audit", "check-proof", d / "junk.json", "--public-key", d / "log.key.pub"
        )
        assert status == 1 and out.startswith("FAILED")

    # The owner rewrites an event's decision, recomputing the trace's hashes and head: verify names
    # its log index and trace.
    def allow(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[1]["decision"] = "ALLOW"
        return rows

    store = Store("sqlite", str(setup["db"]))
    try:
        rewrite_trace(store, setup["sink"], "a", allow)
    finally:
        store.close()
    status, out, _ = run(capsys, *verify)
    assert status == 1 and f"log index 1, trace a: event #2 ({event_id}) changed after it was logged" in out
    status, out, _ = run(capsys, *verify, "--json")
    report = json.loads(out)
    assert status == 1 and report["ok"] is False
    assert {
        "problem": f"event #2 ({event_id}) changed after it was logged",
        "index": 1,
        "trace_id": "a",
    } in report["problems"]


def test_consistency_between_two_checkpoints(
    capsys: pytest.CaptureFixture[str], setup: dict[str, Any]
) -> None:
    d = setup["dir"]
    (d / "old.note").write_text(_checkpoint(capsys, setup))
    setup["sink"].append([at(20, "c"), at(21, "c")])
    (d / "new.note").write_text(_checkpoint(capsys, setup))
    argv = ["audit", "consistency", "--sqlite", setup["db"], d / "old.note", d / "new.note"]
    status, out, _ = run(capsys, *argv, "--public-key", d / "log.key.pub")
    assert status == 0 and out.strip() == "OK: the tree of 6 only grew (tree of 4)"
    status, _, err = run(capsys, *argv[:4], d / "new.note", d / "old.note", "--public-key", d / "log.key.pub")
    assert status == 2 and "the older first" in err


def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], setup: dict[str, Any], tmp_path: Path
) -> None:
    d = setup["dir"]
    status, _, err = run(capsys, "audit", "verify", *setup["common"], "--public-key", d / "log.key.pub")
    assert status == 2 and "name at least one witness" in err
    status, _, err = run(
        capsys, "audit", "verify", *setup["common"], *setup["witnesses"], "--public-key", d / "log.key.pub"
    )
    assert status == 2 and "hold no checkpoint" in err
    status, _, err = run(
        capsys, "audit", "prove", "--sqlite", setup["db"], setup["sink"].read_trace("a")[0].event_id
    )
    assert status == 2 and "in no checkpoint yet" in err
    (d / "log.key").chmod(0o640)
    status, _, err = run(
        capsys, "audit", "checkpoint", *setup["common"], "--key", d / "log.key", "--key-name", "k"
    )
    assert status == 2 and "chmod 600" in err and "PRIVATE" not in err
