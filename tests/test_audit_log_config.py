"""``[audit.checkpoints]``: checked with the policy file, used by ``toolbox audit checkpoint --policy``,
and run in the background by a trail the file builds."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from audit_log_support import at, signing_key
from toolbox.audit import SqliteSink
from toolbox.audit._checkpointing import Checkpointer, CheckpointSettings, checkpoint_settings
from toolbox.audit._config import trail_from_config
from toolbox.audit._note import open_checkpoint
from toolbox.audit._witness import DirectoryWitness
from toolbox.cli import main
from toolbox.errors import ConfigurationError


def _config(tmp_path: Path, **checkpoints: object) -> dict[str, object]:
    table: dict[str, object] = {
        "origin": "audit.example.com/prod",
        "key_file": str(tmp_path / "audit-log.pem"),
        "key_name": "audit-log",
    }
    table.update(checkpoints)
    return {"sinks": [{"type": "sqlite", "path": str(tmp_path / "audit.db")}], "checkpoints": table}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"every_minutes": 1}, "every_minutes"),
        ({"origin": "two\nlines"}, "origin"),
        ({"witness_url_envs": ["postgresql://u:s3cr3t@db/x"]}, "never a URL"),
        ({"every_seconds": -1}, "every_seconds"),
    ],
)
def test_a_bad_checkpoints_table_is_refused_naming_the_key(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as refused:
        trail_from_config(_config(tmp_path, **change), source="policy.toml")
    assert "s3cr3t" not in str(refused.value)


def test_checkpoint_with_the_policy_files_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, key = signing_key(tmp_path)
    SqliteSink(tmp_path / "audit.db").append([at(0, "a"), at(1, "a")])
    (tmp_path / "policy.toml").write_text(
        f"""
version = 1

[audit]
[[audit.sinks]]
type = "sqlite"
path = "{tmp_path / "audit.db"}"

[audit.checkpoints]
origin = "audit.example.com/prod"
key_file = "{tmp_path / "audit-log.pem"}"
key_name = "audit-log"
witness_dirs = ["{tmp_path / "witness"}"]
""",
        encoding="utf-8",
    )
    assert main(["audit", "checkpoint", "--policy", str(tmp_path / "policy.toml")]) == 0
    note = capsys.readouterr().out
    assert open_checkpoint(note, [key]).size == 2
    assert DirectoryWitness(tmp_path / "witness").notes() == [note]


def test_the_background_checkpointer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    signing_key(tmp_path)
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([at(0, "a")])
    settings = checkpoint_settings(
        _config(tmp_path, witness_dirs=[str(tmp_path / "w")]), source="policy.toml"
    )
    assert isinstance(settings, CheckpointSettings)
    checkpointer = Checkpointer(sink, settings)
    note = checkpointer.run_once()
    assert note is not None and DirectoryWitness(tmp_path / "w").notes() == [note]
    sink.append([at(1, "a")])
    assert checkpointer.run_once() != note
    (tmp_path / "audit-log.pem").chmod(0o644)  # a failure is logged, never raised into the thread
    with caplog.at_level(logging.ERROR, logger="toolbox.audit"):
        assert checkpointer.run_once() is None
    assert "audit checkpoint failed" in caplog.text and "chmod 600" in caplog.text


def test_a_trail_built_from_the_file_starts_the_thread(tmp_path: Path) -> None:
    signing_key(tmp_path)
    trail = trail_from_config(_config(tmp_path, every_seconds=3600), source="policy.toml")
    try:
        assert "toolbox-audit-checkpoints" in {t.name for t in threading.enumerate()}
    finally:
        trail.close()
    without = trail_from_config(_config(tmp_path / "x"), source="policy.toml")  # no cadence: no thread
    without.close()


def test_every_events_counts_what_no_checkpoint_covers(tmp_path: Path) -> None:
    signing_key(tmp_path)
    sink = SqliteSink(tmp_path / "audit.db")
    settings = checkpoint_settings(_config(tmp_path, every_events=3), source="policy.toml")
    assert settings is not None and settings.every_events == 3
    checkpointer = Checkpointer(sink, settings)
    sink.append([at(i, "a") for i in range(4)])
    assert checkpointer._new_events() == 4
    checkpointer.run_once()
    assert checkpointer._new_events() == 0
    sink.append([at(9, "b")])
    assert checkpointer._new_events() == 1


@pytest.mark.parametrize(
    ("every", "count", "ticks", "expected"),
    [
        (60, 0, 5, 5),  # every turn (60 s) is due
        (0, 3, 6, 3),  # two new events a 5-second turn: every second turn has 3 or more
        (10, 100, 6, 3),  # 5-second turns (for the count), due by time every second turn
    ],
)
def test_the_loop_checkpoints_when_due(
    tmp_path: Path, every: int, count: int, ticks: int, expected: int
) -> None:
    """The thread's turns, with a fake wait: a checkpoint when the time is up or enough events are new."""
    signing_key(tmp_path)
    sink = SqliteSink(tmp_path / "audit.db")
    settings = checkpoint_settings(
        _config(tmp_path, every_seconds=every, every_events=count, witness_dirs=[str(tmp_path / "w")]),
        source="policy.toml",
    )
    assert settings is not None
    waits: list[float] = []
    moment = [0]

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        moment[0] += 1
        sink.append([at(moment[0] * 10 + i, f"t{moment[0]}") for i in range(2)])  # two new events a turn
        return len(waits) > ticks

    Checkpointer(sink, settings, wait=wait)._loop()
    assert len(DirectoryWitness(tmp_path / "w").notes()) == expected
    assert set(waits) == {min(x for x in (every, 5 if count else 0) if x)}
