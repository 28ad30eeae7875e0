"""`toolbox --version`, the operations `list` shows, and the authorization `check` shows."""

import argparse
import json
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

from toolbox import cli
from toolbox.cli import main

CEDAR_FILES = Path(__file__).parent / "cedar"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)


def _run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_version_prints_the_distribution_version(capsys):
    """``toolbox --version`` prints ``toolbox <version>`` and exits 0."""
    status, out, err = _run(capsys, "--version")
    assert (status, out, err) == (0, f"toolbox {version('toolbox-registry')}\n", "")


def test_the_version_is_looked_up_only_when_asked_for(capsys, monkeypatch):
    """Building the parser (every command) reads no distribution metadata; ``--version`` does."""
    asked: list[str] = []

    def looked_up() -> str:
        asked.append("version")
        return "9.8.7"

    monkeypatch.setattr(cli, "_version", looked_up)
    cli._parser()
    assert _run(capsys, "--help")[0] == 0
    assert asked == []
    for argv in (["--version"], ["--versio"], ["--json", "--version", "list"]):  # argparse's own rules
        assert _run(capsys, *argv) == (0, "toolbox 9.8.7\n", "")
    assert asked == ["version"] * 3


def test_the_version_is_printed_as_argparse_prints_it(capsys, monkeypatch):
    """The help formatter's wrapping, on stdout: what ``action="version"`` printed."""
    monkeypatch.setenv("COLUMNS", "80")
    assert "  --version   show program's version number and exit\n" in _run(capsys, "--help")[1]
    monkeypatch.setenv("COLUMNS", "10")
    monkeypatch.setattr(cli, "_version", lambda: "1.2.3-a-long-local-version")
    reference = argparse.ArgumentParser(prog="toolbox")
    reference.add_argument("--version", action="version", version="%(prog)s 1.2.3-a-long-local-version")
    with pytest.raises(SystemExit) as exited:
        reference.parse_args(["--version"])
    expected = capsys.readouterr()
    assert exited.value.code == 0 and expected.out.count("\n") > 1  # wrapped at 10 columns
    assert _run(capsys, "--version") == (0, expected.out, expected.err)


def test_building_the_parser_does_not_import_multiprocessing():
    """Only ``toolbox serve --workers`` needs it: every other command would pay its import."""
    code = "import sys; from toolbox.cli import _parser; _parser(); print('multiprocessing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False\n"


def test_list_shows_operations_with_effect_and_risk(capsys):
    """Each operation is listed by its by-name name, with its effect and its tool's risk."""
    status, out, _ = _run(capsys, "list")
    assert status == 0
    lines = out.splitlines()
    start = lines.index("Operations (call by name as TOOL.OPERATION):")
    header = lines[start + 1].split()
    assert header == ["OPERATION", "EFFECT", "RISK", "APPROVAL", "SUMMARY"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[start + 2 :] if line.startswith("  ")}
    assert rows["calculator.evaluate"] == ["READ_ONLY", "MEMORY_ONLY"]
    assert rows["http.post"] == ["UNSAFE", "EXTERNAL_RESOURCE"]
    assert rows["fs.delete"] == ["UNSAFE", "PRIVILEGED"]


def test_list_json_has_operations(capsys):
    """The JSON document carries every tool's operations."""
    _, out, _ = _run(capsys, "list", "--json")
    tools = {t["name"]: t for t in json.loads(out)["tools"]}
    assert tools["calculator"]["operations"] == [
        {
            "name": "calculator.evaluate",
            "effect": "READ_ONLY",
            "requires_approval": False,
            "summary": tools["calculator"]["operations"][0]["summary"],
        }
    ]


def _cedar_policy(tmp_path):
    for name in ("billing.cedar", "billing.cedarschema"):
        (tmp_path / name).write_text((CEDAR_FILES / name).read_text())
    path = tmp_path / "toolbox.toml"
    path.write_text(
        textwrap.dedent(
            """
            version = 1
            [authorization]
            cedar_policies = "billing.cedar"
            cedar_schema = "billing.cedarschema"
            """
        )
    )
    return path


def test_check_shows_the_cedar_authorizer(tmp_path, capsys):
    """``check`` names the Cedar files and the policy ids that judge every call."""
    path = _cedar_policy(tmp_path)
    status, out, _ = _run(capsys, "check", "--policy", str(path))
    assert status == 0
    line = next(x for x in out.splitlines() if x.startswith("Authorization: "))
    assert line.startswith(
        f"Authorization: Cedar, 6 policies from {tmp_path / 'billing.cedar'} (validated against"
    )
    assert (
        "clerks-use-billing, auditors-read, own-tenant-only, charge-limit, no-interns, no-bulk-intent" in line
    )
    status, out, _ = _run(capsys, "check", "--policy", str(path), "--json")
    authorization = json.loads(out)["authorization"]
    assert authorization["engine"] == "cedar" and authorization["policy_ids"][0] == "clerks-use-billing"


def test_check_without_cedar_says_none(capsys):
    """Without ``[authorization]`` the line says so; the JSON field is null."""
    _, out, _ = _run(capsys, "check")
    assert "Authorization: none from the policy file" in out
    _, out, _ = _run(capsys, "check", "--json")
    assert json.loads(out)["authorization"] is None


def test_check_with_a_malformed_cedar_policy_exits_2(tmp_path, capsys):
    """A Cedar syntax error is one ``toolbox: error:`` line naming the files and the position."""
    path = _cedar_policy(tmp_path)
    (tmp_path / "billing.cedar").write_text("permit (principal, action, resource);\nforbid (principal;\n")
    status, out, err = _run(capsys, "check", "--policy", str(path))
    assert (status, out) == (2, "")
    assert err.startswith(
        f"toolbox: error: {path}: [authorization]: {tmp_path / 'billing.cedar'}:2:1: policy 2"
    )
