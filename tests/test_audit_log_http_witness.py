"""The HTTP witness (``toolbox audit witness-serve``) on a real loopback server: it keeps and countersigns
checkpoints, refuses forks, forged notes and logs that did not only grow, and serves what it holds."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit_log_support import NOON, ORIGIN, at, signing_key
from toolbox.audit import SqliteSink
from toolbox.audit._log import MerkleLog
from toolbox.audit._note import Checkpoint, KeyFileSigner, VerifierKey, open_checkpoint, sign_checkpoint
from toolbox.audit._witness import DirectoryWitness, Witness, WitnessError
from toolbox.audit._witness_http import HttpWitness, WitnessServer
from toolbox.cli import main

Served = tuple[WitnessServer, KeyFileSigner, VerifierKey, VerifierKey]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A witness on a loopback port, trusting the log's key; (server, log signer, log key, witness key)."""
    log_signer, log_key = signing_key(tmp_path, "audit-log")
    witness_signer, witness_key = signing_key(tmp_path, "witness-1")
    server = WitnessServer(Witness(DirectoryWitness(tmp_path / "remote"), [log_key]), witness_signer)
    server.start()
    try:
        yield server, log_signer, log_key, witness_key
    finally:
        server.close()


def _post(url: str, body: bytes, length: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url + "/add-checkpoint", data=body, method="POST")
    if length is not None:
        request.add_header("Content-Length", length)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def test_checkpoints_are_kept_and_countersigned(tmp_path: Path, served: Served) -> None:
    server, log_signer, log_key, witness_key = served
    sink = SqliteSink(tmp_path / "audit.db")
    log = MerkleLog(sink)
    remote = HttpWitness(server.url, witness_key, [log_key])
    sink.append([at(i, "a") for i in range(3)])
    first = log.checkpoint(log_signer, ORIGIN, now=NOON)
    log.publish(first, [remote])
    sink.append([at(7260, "b")])
    second = log.checkpoint(log_signer, ORIGIN)
    log.publish(second, [remote])
    assert remote.latest_size(ORIGIN) == 4 and sorted(remote.cosignatures) == [3, 4]
    cosigned = second[: second.rfind("\n\n") + 1] + "\n" + remote.cosignatures[4]
    assert open_checkpoint(cosigned, [witness_key]).size == 4  # the witness's own signature
    assert remote.notes() == DirectoryWitness(tmp_path / "remote").notes()

    # A fork of size 4, a forged note, a stale "old", junk and a huge body are refused.
    fork = sign_checkpoint(Checkpoint(ORIGIN, 4, bytes(32), "2026-01-01T13:00:00Z"), log_signer)
    with pytest.raises(WitnessError, match=r"\(422\).*FORK"):
        remote.add(fork, [])
    other_signer, _ = signing_key(tmp_path, "intruder")
    forged = sign_checkpoint(Checkpoint(ORIGIN, 9, bytes(32), "2026-01-01T13:00:00Z"), other_signer)
    status, answer = _post(server.url, f"old 4\n\n{forged}".encode())
    assert (status, answer) == (403, "no signature by a trusted key\n")  # never the witness's path
    assert _post(server.url, f"old 3\n\n{second}".encode()) == (409, "4\n")
    assert _post(server.url, b"nonsense")[0] == 400
    assert _post(server.url, b"old 4\n%%%\n\n" + second.encode())[0] == 400
    assert _post(server.url, b"x" * 70_000)[0] == 413
    assert [c.size for c in remote.checkpoints(ORIGIN)] == [3, 4]


def test_a_cosignature_by_another_key_is_refused(tmp_path: Path, served: Served) -> None:
    server, log_signer, log_key, _ = served
    _, wrong_key = signing_key(tmp_path, "witness-2")
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([at(0, "a")])
    note = MerkleLog(sink).checkpoint(log_signer, ORIGIN)
    with pytest.raises(WitnessError, match="cosignature does not verify"):
        HttpWitness(server.url, wrong_key, [log_key]).add(note, [])


def test_the_cli_checkpoints_to_and_verifies_against_an_http_witness(
    tmp_path: Path,
    served: Served,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, _, _, _ = served
    (tmp_path / "witness.pub").write_text(served[3].text() + "\n")
    (tmp_path / "log.pub").write_text(served[2].text() + "\n")
    SqliteSink(tmp_path / "audit.db").append([at(0, "a"), at(1, "a")])
    common = ["--sqlite", str(tmp_path / "audit.db"), "--origin", ORIGIN]
    http = ["--witness-http", server.url, str(tmp_path / "witness.pub")]
    key = ["--key", str(tmp_path / "audit-log.pem"), "--key-name", "audit-log"]
    assert main(["audit", "checkpoint", *common, *key, *http]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", *common, *http, "--public-key", str(tmp_path / "log.pub")]) == 0
    assert "the log matches every witnessed checkpoint" in capsys.readouterr().out


def test_the_policy_files_http_witnesses(tmp_path: Path, served: Served) -> None:
    from toolbox.audit._checkpointing import Checkpointer, checkpoint_settings
    from toolbox.errors import ConfigurationError

    server, _, log_key, witness_key = served
    (tmp_path / "witness.pub").write_text(witness_key.text() + "\n")
    table = {
        "origin": ORIGIN,
        "key_file": str(tmp_path / "audit-log.pem"),
        "key_name": "audit-log",
        "witness_http": [{"url": server.url, "key_file": str(tmp_path / "witness.pub")}],
    }
    settings = checkpoint_settings({"checkpoints": table}, source="policy.toml")
    assert settings is not None
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([at(0, "a")])
    note = Checkpointer(sink, settings).run_once()
    assert note is not None
    assert HttpWitness(server.url, witness_key, [log_key]).notes() == [note]
    for bad in [
        {"url": "ftp://x", "key_file": "k"},
        {"url": "https://u:s3cr3t@w", "key_file": "k"},
        {"url": "x"},
    ]:
        with pytest.raises(ConfigurationError, match="witness_http") as refused:
            checkpoint_settings({"checkpoints": {**table, "witness_http": [bad]}}, source="policy.toml")
        assert "s3cr3t" not in str(refused.value)
