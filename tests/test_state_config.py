"""``[state]`` in the policy file, the store boundary attacked, and ``toolbox kill``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state_support import REDIS_URL, unique, wipe_redis
from toolbox import ToolPolicy
from toolbox.cli import main
from toolbox.errors import PolicyFileError
from toolbox.pipeline._state_ports import key_part
from toolbox.state._config import state_from_config
from toolbox.state._redis_backend import RedisState, connect


def load(tmp_path: Path, state: str) -> ToolPolicy:
    path = tmp_path / "policy.toml"
    path.write_text(f"version = 1\n{state}\n", encoding="utf-8")
    return ToolPolicy.from_file(path)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[state]\nbackend = "etcd"', "state.backend: unknown backend 'etcd'"),
        ('[state]\nbackend = "redis"', "state: the redis backend needs exactly one of url and url_env"),
        ('[state]\nbackend = "memory"\nurl = "redis://x"', "state.url: the memory backend has no URL"),
        ('[state]\nbackend = "redis"\nurl = "http://x"', "state.url: a redis URL starts with"),
        ('[state]\nbackend = "sql"\nurl = "redis://x"', "state.url: a sql URL starts with"),
        ('[state]\nbackend = "redis"\nurl = "redis://:hunter2@h:6379/0"', "state.url: holds a password"),
        ('[state]\nbackend = "redis"\nurl_env = "NOT A NAME"', "state.url_env: must be an environment"),
        ('[state]\nnamespace = "Prod:x"', "state.namespace: must be lowercase"),
        ("[state]\nkill_switch_refresh = -1", "state.kill_switch_refresh: must be from 0"),
        ('[state]\nkill_switch_refresh = "1s"', "state.kill_switch_refresh: must be a number"),
        ('[state]\nrate_limits_fail_open = "yes"', "state.rate_limits_fail_open: must be true or false"),
        ("[state]\ncolour = 1", "state: unknown key(s) colour"),
        ('[[state.budgets]]\nper = "galaxy"\ncalls = 1\nwindow = 1', "state.budgets[0].per: unknown scope"),
        (
            '[[state.budgets]]\nper = "tenant"\ncalls = -1\nwindow = 1',
            "state.budgets[0].calls: must be at least 0",
        ),
        ('[[state.budgets]]\nper = "tenant"\ncalls = 1', "state.budgets[0].window: missing"),
        (
            '[[state.rate_limits]]\nper = "run"\ncalls = 1\nwindow = 1',
            "state.rate_limits[0].per: unknown scope",
        ),
        (
            '[[state.rate_limits]]\nper = "tool"\ncalls = 0\nwindow = 1',
            "state.rate_limits[0].calls: must be at least 1",
        ),
        (
            '[[state.rate_limits]]\nper = "tool"\ncalls = 1\nwindow = 1\ntool = "a:b"',
            "rate_limits[0].tool: not a valid",
        ),
        ("[state]\nbudgets = 3", "state.budgets: must be an array of tables"),
        ("[state]\nmax_pending_approvals = -1", "state.max_pending_approvals: must be at least 0"),
        ("[state]\nmax_pending_approvals = 1.5", "state.max_pending_approvals: must be an integer"),
        ("[state]\nmax_pending_approvals = true", "state.max_pending_approvals: must be an integer"),
        ("[state]\nmax_pending_approvals = 1000001", "state.max_pending_approvals: must be at most 100000"),
    ],
)
def test_bad_state_tables_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(PolicyFileError) as info:
        load(tmp_path, table)
    assert message in str(info.value)
    assert "hunter2" not in str(info.value)


def test_too_many_rules_are_refused(tmp_path: Path) -> None:
    rules = '[[state.budgets]]\nper = "tenant"\ncalls = 1\nwindow = 1\n' * 65
    with pytest.raises(PolicyFileError, match="at most 64 rules"):
        load(tmp_path, rules)


def test_url_env_unset_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_TEST_STATE_URL", raising=False)
    policy = load(tmp_path, '[state]\nbackend = "redis"\nurl_env = "FLEET_TEST_STATE_URL"')
    with pytest.raises(Exception, match="FLEET_TEST_STATE_URL is not set"):
        state_from_config(policy.governance["state"])


def test_a_valid_table_is_stored_validated(tmp_path: Path) -> None:
    policy = load(
        tmp_path,
        '[state]\nbackend = "redis"\nurl = "redis://127.0.0.1:6379/0"\nnamespace = "prod"\n'
        '[[state.rate_limits]]\nper = "principal"\ncalls = 10\nwindow = 1.5\ntool = "http"\n',
    )
    config = policy.governance["state"]
    assert config["backend"] == "redis" and config["kill_switch_refresh"] == 1.0
    assert config["max_pending_approvals"] == 20  # the default bound
    assert config["rate_limits"] == [{"per": "principal", "calls": 10, "window": 1.5, "tool": "http"}]
    state = state_from_config(config)
    assert state.rate_limits[0].name("rate") == "state:rate:principal:http"
    assert state.max_pending_approvals == 20
    assert state_from_config({**config, "max_pending_approvals": 0}).max_pending_approvals == 0
    state.close()


# -- the store boundary, attacked ------------------------------------------------------


@pytest.mark.parametrize(
    "hostile",
    ["acme:b0:x", "a}b{c", "*", "x" * 10_000, "t\nenant", "%h" + "0" * 64, "../../etc", "ü" * 200],
)
def test_key_parts_never_collide_or_escape(hostile: str) -> None:
    part = key_part(hostile)
    assert ":" not in part and "{" not in part and "}" not in part and "\n" not in part
    assert len(part) <= 128
    assert part != key_part(hostile + "x")


def test_long_names_do_not_collide() -> None:
    a, b = "x" * 500 + "a", "x" * 500 + "b"
    assert key_part(a) != key_part(b) and key_part(a).startswith("%h")
    assert key_part("%h" + "0" * 64) != key_part("%h" + "0" * 64 + "x")
    assert not key_part("%h" + "0" * 64).startswith("%h")  # a literal %h... is escaped


def test_redis_keys_stay_in_their_namespace() -> None:
    """Tenant, principal and request ids chosen by an attacker cannot reach another deployment's keys."""
    from toolbox.pipeline._grants import ApprovalRequest, PendingApproval
    from toolbox.pipeline._state_ports import Quota

    state = RedisState(connect(REDIS_URL), namespace=unique())
    other = RedisState(connect(REDIS_URL), namespace=unique())
    try:
        hostile = "}:toolbox:{" + other.prefix + "kill"
        state.admit(
            [Quota("b0:" + key_part(hostile), 5, 60.0, "r")], [Quota("r0:" + key_part(hostile), 5, 1.0, "r")]
        )
        request = ApprovalRequest(hostile, "t", "o", {}, "f", (), hostile, hostile)
        state.submit(PendingApproval(request, "purpose", "x", "r", 0.0, 9e9))
        state.engage("add", reason="r", who="w")
        client = state._client
        escaped = state.prefix.replace("{", "\\{").replace("}", "\\}")
        mine = set(client.scan_iter(match=escaped + "*"))
        theirs = set(client.scan_iter(match=other.prefix.replace("{", "\\{").replace("}", "\\}") + "*"))
        assert mine and not theirs
        assert all(key.startswith(state.prefix) for key in mine)
        assert other.engaged() == {}
        got = state.get(hostile)
        assert got is not None and got.request.tenant == hostile
    finally:
        wipe_redis(state)
        wipe_redis(other)


def test_huge_and_odd_names_through_the_sql_store(tmp_path: Path) -> None:
    from toolbox.pipeline._state_ports import Quota
    from toolbox.state._sql_backend import SqlState

    sql = SqlState(f"sqlite:///{tmp_path / 's.db'}", prefix="odd_")
    try:
        key = "b0:tenant:" + key_part("'; DROP TABLE odd_counters; --" * 100)
        assert sql.admit([Quota(key, 1, 60.0, "r")], []) is None
        refusal = sql.admit([Quota(key, 1, 60.0, "r")], [])
        assert refusal is not None and not refusal.rate
        assert sql.get("'; DROP TABLE odd_approvals; --") is None
    finally:
        sql.close()


# -- toolbox kill ------------------------------------------------------------------------------


def run_cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_kill_refuses_the_memory_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('version = 1\n[state]\nbackend = "memory"\n', encoding="utf-8")
    status, _, err = run_cli("kill", "engage", "--reason", "x", "--policy", str(path), capsys=capsys)
    assert status == 2 and "needs a shared [state] backend" in err


def test_kill_engage_release_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = unique()
    path = tmp_path / "policy.toml"
    path.write_text(
        f'version = 1\n[state]\nbackend = "redis"\nurl = "{REDIS_URL}"\nnamespace = "{namespace}"\n',
        encoding="utf-8",
    )
    try:
        status, _, err = run_cli("kill", "engage", "--policy", str(path), capsys=capsys)
        assert status == 2 and "needs --reason" in err
        status, _, err = run_cli(
            "kill", "engage", "--tool", "a;b", "--reason", "x", "--policy", str(path), capsys=capsys
        )
        assert status == 2 and "not a valid tool name" in err
        status, _, err = run_cli("kill", "engage", "--reason", " ", "--policy", str(path), capsys=capsys)
        assert status == 2 and "needs a reason" in err
        status, out, err = run_cli(
            "kill",
            "engage",
            "--tool",
            "add",
            "--reason",
            "bad output",
            "--who",
            "ann",
            "--policy",
            str(path),
            capsys=capsys,
        )
        assert status == 0 and "engaged for add" in out and "not audited" in err
        status, out, _ = run_cli("kill", "status", "--json", "--policy", str(path), capsys=capsys)
        [entry] = json.loads(out)["engaged"]
        assert (entry["tool"], entry["who"], entry["reason"]) == ("add", "ann", "bad output")
        status, out, _ = run_cli(
            "kill", "release", "--tool", "add", "--reason", "fixed", "--policy", str(path), capsys=capsys
        )
        assert status == 0 and "released for add" in out
        status, out, _ = run_cli(
            "kill", "release", "--tool", "add", "--reason", "again", "--policy", str(path), capsys=capsys
        )
        assert status == 0 and "was not engaged" in out
        status, out, _ = run_cli("kill", "status", "--policy", str(path), capsys=capsys)
        assert out.strip() == "No kill switch is engaged."
    finally:
        state: Any = RedisState(connect(REDIS_URL), namespace=namespace)
        wipe_redis(state)


@pytest.fixture
def redis_policy(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A policy file whose ``[state]`` is a fresh Redis namespace, and that namespace's store."""
    namespace = unique()
    path = tmp_path / "policy.toml"
    path.write_text(
        f'version = 1\n[state]\nbackend = "redis"\nurl = "{REDIS_URL}"\nnamespace = "{namespace}"\n',
        encoding="utf-8",
    )
    state: Any = RedisState(connect(REDIS_URL), namespace=namespace)
    try:
        yield path, state
    finally:
        wipe_redis(state)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--reason", "stop\x1b[2J\x1b[31mALL CLEAR"),  # ANSI: clear the screen, paint it red
        ("--reason", "line one\nNo kill switch is engaged."),  # a forged second line
        ("--who", "ann\x9b2J"),  # a C1 control sequence introducer
        ("--reason", "tab\there"),
    ],
)
def test_kill_refuses_control_characters_in_reason_and_who(
    redis_policy: tuple[Path, Any], capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    path, state = redis_policy
    arguments = {"--reason": "incident", "--who": "ann", option: value}
    command = ["kill", "engage", *(x for pair in arguments.items() for x in pair), "--policy", str(path)]
    status, out, err = run_cli(*command, capsys=capsys)
    assert status == 2 and "printable characters (one line)" in err and not out
    assert "\x1b" not in err and "\x9b" not in err  # the refused text is not echoed either
    assert state.engaged() == {}


def test_kill_status_escapes_what_another_writer_stored(
    redis_policy: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path, state = redis_policy
    # Written straight to the store (an older toolbox, another tool): the CLI checks nothing here.
    state.engage(None, reason="x\x1b]0;owned\x07\nforged line", who="eve\x9b")
    status, out, _ = run_cli("kill", "status", "--policy", str(path), capsys=capsys)
    assert status == 0
    [line] = out.splitlines()
    assert "\x1b" not in line and "\x07" not in line and "\x9b" not in line
    assert line.startswith("ALL TOOLS: engaged by eve\\x9b at 20")  # an ISO 8601 UTC time
    assert "+00:00: x\\x1b]0;owned\\x07\\x0aforged line" in line


@pytest.mark.parametrize(
    "stored", ["not json", "{}", '{"reason": "x"}', "[1, 2]", '{"reason": 1, "who": 2, "at": "x"}']
)
def test_a_malformed_stored_switch_is_shown_engaged_and_still_stops_calls(
    redis_policy: tuple[Path, Any], capsys: pytest.CaptureFixture[str], stored: str
) -> None:
    """Another writer left a switch's value malformed: `kill status` says it is engaged (it crashed
    with JSONDecodeError), and the switch still stops every call (it exists: fail closed)."""
    path, state = redis_policy
    state.engage("add", reason="first", who="ann")
    state._client.hset(state._layout.kill, state._layout.switch(None), stored)
    status, out, err = run_cli("kill", "status", "--policy", str(path), capsys=capsys)
    assert status == 0, err
    assert "ALL TOOLS: engaged by (the stored entry is unreadable)" in out
    assert "add: engaged by ann" in out
    status, out, _ = run_cli("kill", "status", "--json", "--policy", str(path), capsys=capsys)
    assert {entry["tool"] for entry in json.loads(out)["engaged"]} == {None, "add"}
    assert set(state.engaged()) == {None, "add"}


def test_kill_with_the_store_down_is_one_line_without_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        'version = 1\n[state]\nbackend = "redis"\nurl = "redis://127.0.0.1:1/0"\n', encoding="utf-8"
    )
    status, _, err = run_cli("kill", "engage", "--reason", "x", "--policy", str(path), capsys=capsys)
    assert status == 2 and "the Redis state store failed" in err
    assert "127.0.0.1:1" not in err
