import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import zygote
from toolbox.cli import main
from toolbox_test_support.distributions import on_sys_path, write_distribution

ACK_ENV = "ACME_SHELL_APPROVED"
ACK_VALUE = "yes-really"

ACME_PLUGIN = f"""
    from toolbox import Acknowledgement, RiskClass, hookimpl
    from toolbox.testing import fake_provider

    @hookimpl
    def toolbox_providers():
        return [
            fake_provider("acme-web", risk=RiskClass.EXTERNAL_RESOURCE),
            fake_provider(
                "acme-shell",
                risk=RiskClass.PRIVILEGED,
                acknowledgement=Acknowledgement(env="{ACK_ENV}", value="{ACK_VALUE}"),
            ),
        ]
"""


def _provider_of(tool: str) -> str:
    return f"""
        from toolbox import hookimpl
        from toolbox.testing import fake_provider

        @hookimpl
        def toolbox_providers():
            return [fake_provider("{tool}")]
    """


def _write_acme(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    write_distribution(root, "acme-tools", {"acme_plugin": ACME_PLUGIN}, {"acme": "acme_plugin"})
    return root


def _write_policy(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """Keep the machine's policy and acknowledgement out of every test."""
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    monkeypatch.delenv(ACK_ENV, raising=False)


@pytest.fixture
def acme(tmp_path):
    """The fake distribution acme-tools (acme-web, acme-shell) on sys.path."""
    with on_sys_path(_write_acme(tmp_path / "site")) as root:
        yield root


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _row(out: str, tool: str) -> list[str]:
    """The table row of ``tool`` split into columns."""
    for line in out.splitlines():
        if line.split()[:1] == [tool]:
            return line.split()
    raise AssertionError(f"no row for {tool!r} in:\n{out}")


def _decisions(out: str) -> dict[str, dict]:
    return {d["tool"]: d for d in json.loads(out)["tools"]}


# -- toolbox list -----------------------------------------------------------------


def test_list_shows_calculator_and_provider_tools(acme, capsys):
    """list shows the core calculator and a fake provider's tools with their acknowledgement variable."""
    status, out, err = _run(capsys, "list")
    assert status == 0, err
    assert err == ""
    assert out.splitlines()[0].split() == ["TOOL", "VERSION", "RISK", "ACKNOWLEDGEMENT", "DISTRIBUTION"]
    assert _row(out, "calculator") == ["calculator", "1.0", "MEMORY_ONLY", "-", "toolbox-registry"]
    assert _row(out, "acme-shell") == ["acme-shell", "0", "PRIVILEGED", ACK_ENV, "acme-tools"]
    assert _row(out, "acme-web") == ["acme-web", "0", "EXTERNAL_RESOURCE", "-", "acme-tools"]
    assert ACK_VALUE not in out  # list names the variable only


def test_list_columns_are_aligned(acme, capsys):
    """Every column of the tool table starts at the same offset on every row."""
    _, out, _ = _run(capsys, "list")
    lines = out.splitlines()
    table = lines[: lines.index("")]
    offset = table[0].index("DISTRIBUTION")
    assert all(line[offset - 2 : offset] == "  " and line[offset] != " " for line in table)


def test_list_reports_broken_providers_and_keeps_the_others(tmp_path, capsys):
    """A provider failing at import or in its hook is listed with its error; the others still list."""
    root = _write_acme(tmp_path / "site")
    write_distribution(
        root,
        "acme-broken-import",
        {"acme_broken_import": "raise ImportError('acme_missing_dependency is not installed')\n"},
        {"broken": "acme_broken_import"},
    )
    write_distribution(
        root,
        "acme-broken-hook",
        {
            "acme_broken_hook": """
            from toolbox import hookimpl

            @hookimpl
            def toolbox_providers():
                raise RuntimeError("hook exploded")
        """
        },
        {"broken": "acme_broken_hook"},
    )
    with on_sys_path(root):
        status, out, err = _run(capsys, "list")
        json_status, json_out, _ = _run(capsys, "list", "--json")
    assert status == 0, err
    assert _row(out, "calculator")[-1] == "toolbox-registry"
    assert _row(out, "acme-web")[-1] == "acme-tools"
    assert "Broken providers (" in out  # installed providers may add to the count
    import_row = _row(out, "acme-broken-import")
    assert " ".join(import_row[1:]) == "ImportError: acme_missing_dependency is not installed"
    hook_row = _row(out, "acme-broken-hook")
    assert " ".join(hook_row[1:]) == "RuntimeError: hook exploded"
    assert "Traceback" not in out + err

    assert json_status == 0
    broken = {b["distribution"]: b for b in json.loads(json_out)["broken"]}
    assert broken["acme-broken-import"]["error"] == "ImportError: acme_missing_dependency is not installed"
    assert broken["acme-broken-hook"]["error"] == "RuntimeError: hook exploded"
    assert "acme-broken-hook" in broken["acme-broken-hook"]["origin"]


def test_list_escapes_control_characters_from_providers(tmp_path, capsys):
    """A provider's error cannot smuggle terminal escapes or extra lines into the output."""
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(
        root,
        "acme-evil",
        {
            "acme_evil": """
            from toolbox import hookimpl

            @hookimpl
            def toolbox_providers():
                raise RuntimeError("bad\\x1b[2Jthing\\nFAKE LINE")
        """
        },
        {"evil": "acme_evil"},
    )
    with on_sys_path(root):
        status, out, _ = _run(capsys, "list")
    assert status == 0
    assert "\x1b" not in out
    assert "bad\\x1b[2Jthing\\x0aFAKE LINE" in out
    assert not any(line.startswith("FAKE LINE") for line in out.splitlines())


def test_list_json_has_tools_broken_and_blocked(acme, tmp_path, capsys):
    """list --json prints one document with tools, broken providers and blocked distributions."""
    blocked_root = tmp_path / "blocked"
    blocked_root.mkdir()
    write_distribution(
        blocked_root, "acme-blocked", {"acme_blocked": _provider_of("acme-b")}, {"b": "acme_blocked"}
    )
    policy = _write_policy(tmp_path, 'version = 1\n[providers]\nblock = ["acme-blocked"]\n')
    with on_sys_path(blocked_root):
        status, out, err = _run(capsys, "list", "--json", "--policy", str(policy))
    assert status == 0, err
    document = json.loads(out)
    assert {"tools", "broken", "blocked"} <= set(document)
    tools = {t["name"]: t for t in document["tools"]}
    assert tools["calculator"] == {
        "name": "calculator",
        "version": "1.0",
        "risk": "MEMORY_ONLY",
        "summary": tools["calculator"]["summary"],
        "acknowledgement_env": None,
        "acknowledgement_value": None,
        "distribution": "toolbox-registry",
        "operations": tools["calculator"]["operations"],
    }
    assert tools["acme-shell"]["acknowledgement_env"] == ACK_ENV
    assert tools["acme-shell"]["acknowledgement_value"] == ACK_VALUE
    assert tools["acme-shell"]["distribution"] == "acme-tools"
    assert "acme-b" not in tools
    assert document["blocked"] == ["acme-blocked"]
    assert isinstance(document["broken"], list)


def test_global_json_flag_before_the_command(acme, capsys):
    """`toolbox --json list` is the same as `toolbox list --json`."""
    status, out, _ = _run(capsys, "--json", "list")
    assert status == 0
    assert "calculator" in {t["name"] for t in json.loads(out)["tools"]}


def test_list_shows_blocked_distributions(acme, tmp_path, capsys):
    """A distribution blocked by the policy is listed as blocked, and its tools are not."""
    policy = _write_policy(tmp_path, 'version = 1\n[providers]\nblock = ["acme-tools"]\n')
    status, out, _ = _run(capsys, "list", "--policy", str(policy))
    assert status == 0
    assert "Blocked by the policy (1):" in out
    assert "  acme-tools" in out.splitlines()
    assert "acme-web" not in out


# -- toolbox check ----------------------------------------------------------------


def test_check_standard_policy_denies_external_resource(acme, capsys):
    """Under the standard policy an EXTERNAL_RESOURCE tool is denied (POLICY_DENIED, default:deny)."""
    status, out, err = _run(capsys, "check")
    assert status == 0, err
    assert out.startswith("Policy: standard")
    assert _row(out, "acme-web")[:6] == [
        "acme-web",
        "denied",
        "POLICY_DENIED",
        "default:deny",
        "EXTERNAL_RESOURCE",
        "not",
    ]
    assert _row(out, "calculator")[:4] == ["calculator", "allowed", "ALLOWED", "default:risk:MEMORY_ONLY"]
    assert "acme-web    EXTERNAL_RESOURCE tools need an explicit allow" in out


def test_check_json_uses_decision_fields(acme, capsys):
    """check --json lists every decision with ToolDecision.as_dict() fields."""
    status, out, _ = _run(capsys, "check", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["policy"] == "standard"
    assert document["ok"] is True
    assert document["required"] == []
    web = _decisions(out)["acme-web"]
    assert web["allowed"] is False
    assert web["reason_code"] == "POLICY_DENIED"
    assert web["rule"] == "default:deny"
    assert web["risk"] == "EXTERNAL_RESOURCE"
    assert web["distribution"] == "acme-tools"
    assert "explicit allow" in web["detail"]


def test_check_policy_file_allows_tool(acme, tmp_path, capsys):
    """A policy file that allows the tool makes check report it allowed."""
    policy = _write_policy(tmp_path, 'version = 1\n[allow]\ntools = ["acme-web"]\n')
    status, out, _ = _run(capsys, "check", "--policy", str(policy))
    assert status == 0
    assert out.splitlines()[0] == f"Policy: {policy}"
    assert _row(out, "acme-web")[:4] == ["acme-web", "allowed", "ALLOWED", "allow:tool:acme-web"]


def test_check_acknowledgement_missing_names_variable_and_value(acme, tmp_path, capsys):
    """An allowed PRIVILEGED tool without its acknowledgement is NOT_ACKNOWLEDGED, naming var and value."""
    policy = _write_policy(tmp_path, 'version = 1\n[allow]\ntools = ["acme-shell"]\n')
    status, out, _ = _run(capsys, "check", "--policy", str(policy))
    assert status == 0
    row = _row(out, "acme-shell")
    assert row[:4] == ["acme-shell", "denied", "NOT_ACKNOWLEDGED", f"acknowledgement:{ACK_ENV}"]
    assert " ".join(row[5:]) == f"missing: set {ACK_ENV}={ACK_VALUE}"
    assert f"{ACK_ENV} is not set" in out

    _, json_out, _ = _run(capsys, "check", "--json", "--policy", str(policy))
    shell = _decisions(json_out)["acme-shell"]
    assert shell["acknowledgement"] == "MISSING"
    assert (shell["acknowledgement_env"], shell["acknowledgement_value"]) == (ACK_ENV, ACK_VALUE)


def test_check_acknowledgement_wrong_value_is_not_printed(acme, tmp_path, capsys, monkeypatch):
    """A wrong acknowledgement value is reported as wrong, and the value actually set never printed."""
    monkeypatch.setenv(ACK_ENV, "operator-typo-value")
    policy = _write_policy(tmp_path, 'version = 1\n[allow]\ntools = ["acme-shell"]\n')
    for argv in (["check"], ["check", "--json"]):
        status, out, err = _run(capsys, *argv, "--policy", str(policy), "--require", "acme-shell")
        assert status == 1
        assert "operator-typo-value" not in out + err
    _, out, _ = _run(capsys, "check", "--policy", str(policy))
    assert " ".join(_row(out, "acme-shell")[5:]) == f"wrong value: set {ACK_ENV}={ACK_VALUE}"


def test_check_acknowledgement_satisfied(acme, tmp_path, capsys, monkeypatch):
    """With the variable set to the exact value, the tool is allowed and the acknowledgement satisfied."""
    monkeypatch.setenv(ACK_ENV, ACK_VALUE)
    policy = _write_policy(tmp_path, 'version = 1\n[allow]\ntools = ["acme-shell"]\n')
    status, out, _ = _run(capsys, "check", "--policy", str(policy), "--require", "acme-shell")
    assert status == 0
    row = _row(out, "acme-shell")
    assert row[:3] == ["acme-shell", "allowed", "ALLOWED"]
    assert " ".join(row[5:]) == f"satisfied ({ACK_ENV})"


def test_require_usable_tool_exits_0(acme, capsys):
    """--require on a usable tool exits 0."""
    status, out, err = _run(capsys, "check", "--require", "calculator")
    assert status == 0
    assert err == ""
    assert "  calculator  usable" in out.splitlines()


def test_require_unusable_tool_exits_1_and_says_why(acme, capsys):
    """--require on a denied tool exits 1, naming the tool and the reason."""
    status, out, err = _run(capsys, "check", "--require", "calculator", "--require", "acme-web")
    assert status == 1
    assert "acme-web    NOT USABLE (POLICY_DENIED, rule default:deny): EXTERNAL_RESOURCE" in out
    assert err.startswith("toolbox: required tools not usable: acme-web (POLICY_DENIED)")
    assert "calculator" not in err


def test_require_unknown_tool_exits_1(acme, capsys):
    """--require on a name nobody provides exits 1 with TOOL_UNAVAILABLE."""
    status, out, err = _run(capsys, "check", "--require", "acme-nothing")
    assert status == 1
    assert "acme-nothing  NOT USABLE (TOOL_UNAVAILABLE, rule registry)" in out
    assert "acme-nothing (TOOL_UNAVAILABLE)" in err

    status, out, _ = _run(capsys, "check", "--json", "--require", "acme-nothing")
    assert status == 1
    document = json.loads(out)
    assert document["ok"] is False
    assert document["required"][0]["tool"] == "acme-nothing"
    assert document["required"][0]["reason_code"] == "TOOL_UNAVAILABLE"


def test_toolbox_policy_env_is_the_fallback(acme, tmp_path, capsys, monkeypatch):
    """Without --policy, the file named by TOOLBOX_POLICY decides; --policy beats it."""
    allow = _write_policy(tmp_path, 'version = 1\n[allow]\ntools = ["acme-web"]\n', "allow.toml")
    monkeypatch.setenv("TOOLBOX_POLICY", str(allow))
    status, out, _ = _run(capsys, "check", "--require", "acme-web")
    assert status == 0
    assert out.splitlines()[0] == f"Policy: {allow} (from TOOLBOX_POLICY)"
    assert _row(out, "acme-web")[:2] == ["acme-web", "allowed"]

    standard = _write_policy(tmp_path, "version = 1\n", "standard.toml")
    status, out, _ = _run(capsys, "check", "--policy", str(standard), "--require", "acme-web")
    assert status == 1
    assert _row(out, "acme-web")[:2] == ["acme-web", "denied"]


# -- errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version = 1\nsurprise = true\n", "surprise"),
        ('version = 1\n[allow]\ntools = ["acme-web"]\n[deny]\ntools = ["acme-web"]\n', "both"),
        ("version = [\n", "not valid TOML"),
        ('version = 1\n[allow]\ntools = ["acme-nobody"]\n', "unknown tool 'acme-nobody'"),
    ],
    ids=["unknown-key", "allow-and-deny", "not-toml", "unknown-tool"],
)
@pytest.mark.parametrize("command", ["check", "list"])
def test_malformed_policy_file_exits_2(acme, tmp_path, capsys, text, expected, command):
    """A malformed policy file is one 'toolbox: error:' line on stderr and exit status 2."""
    policy = _write_policy(tmp_path, text)
    status, out, err = _run(capsys, command, "--policy", str(policy))
    assert status == 2
    assert out == ""
    assert err.startswith("toolbox: error: ")
    assert err.count("\n") == 1
    assert expected in err
    assert "Traceback" not in err


def test_malformed_policy_from_env_exits_2(acme, tmp_path, capsys, monkeypatch):
    """A malformed file named by TOOLBOX_POLICY is an error too."""
    monkeypatch.setenv("TOOLBOX_POLICY", str(_write_policy(tmp_path, "version = 2\n")))
    status, _, err = _run(capsys, "check")
    assert status == 2
    assert err.startswith("toolbox: error: ")


def test_missing_policy_file_exits_2(acme, tmp_path, capsys):
    """A policy file that does not exist is an error, not a traceback."""
    status, _, err = _run(capsys, "check", "--policy", str(tmp_path / "nope.toml"))
    assert status == 2
    assert err.startswith("toolbox: error: ")
    assert "does not exist" in err
    assert "Traceback" not in err


def test_provider_conflict_exits_2_naming_both_distributions(tmp_path, capsys):
    """Two distributions providing one tool name is an error naming both of them."""
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "acme-one", {"acme_one": _provider_of("acme-dup")}, {"dup": "acme_one"})
    write_distribution(root, "acme-two", {"acme_two": _provider_of("acme-dup")}, {"dup": "acme_two"})
    with on_sys_path(root):
        for command in ("list", "check"):
            status, out, err = _run(capsys, command)
            assert status == 2
            assert out == ""
            assert err.startswith("toolbox: error: ")
            assert "'acme-dup'" in err
            assert "acme-one" in err
            assert "acme-two" in err
            assert "Traceback" not in err


def test_usage_errors_exit_2(capsys):
    """An unknown command or a missing one exits 2 with argparse's message."""
    for argv in ([], ["frobnicate"], ["list", "--require", "x"]):
        status, _, err = _run(capsys, *argv)
        assert status == 2
        assert "toolbox: error:" in err


# -- console script ---------------------------------------------------------------


def test_console_script_prints_json(tmp_path):
    """The installed `toolbox` script runs and finds a distribution on PYTHONPATH."""
    script = shutil.which("toolbox", path=str(Path(sys.executable).parent))
    assert script, "console script missing: run `.venv/bin/pip install -e .`"
    site = _write_acme(tmp_path / "site")
    env = dict(os.environ)
    env.pop("TOOLBOX_POLICY", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    # One child proves the script, started cold as a user's shell starts it (its interpreter, its
    # imports from nothing); the flag orders are tested in-process above.
    result = subprocess.run(
        [script, "list", "--json"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    tools = {t["name"]: t["distribution"] for t in document["tools"]}
    assert tools["calculator"] == "toolbox-registry"
    assert tools["acme-web"] == "acme-tools"


@pytest.mark.parametrize("command", [["list"], ["check", "--json"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(command):
    """``toolbox list | head``: the reader closes the pipe; no BrokenPipeError, no error line.

    The command is a child of the zygote: it writes to this very pipe and exits as ``python
    SCRIPT`` would (its streams flushed, a failing flush an error status: tests/zygote.py).
    """
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the command writes
    try:
        done = subprocess.run(
            zygote.toolbox_command(*command),
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "TOOLBOX_POLICY": ""},
            check=False,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")
