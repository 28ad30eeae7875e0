"""A policy naming a tool whose provider is broken says so, instead of only "unknown tool"."""

import pytest

from toolbox import ExecutionContext, Gateway, ToolPolicy, Tools
from toolbox.cli import main
from toolbox.errors import PolicyFileError
from toolbox.registry._discovery import BrokenProvider, explain_missing
from toolbox_test_support.distributions import on_sys_path, write_distribution

BROKEN_MODULE = "raise ImportError(\"No module named 'acme_sdk'\")\n"
EXPECTED = (
    "provider acme-weather (entry point weather) failed to load: ImportError: No module named 'acme_sdk'"
)


@pytest.fixture
def broken_weather(tmp_path, monkeypatch):
    """acme-weather's entry point fails to import; a policy file allows its tool acme.weather."""
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "acme-weather", {"acme_weather": BROKEN_MODULE}, {"weather": "acme_weather"})
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[allow]\ntools = ["acme.weather"]\n')
    with on_sys_path(root):
        yield policy


def test_tools_load_names_the_broken_provider(broken_weather):
    """``Tools.load`` keeps "unknown tool" and adds the provider's import error."""
    with pytest.raises(PolicyFileError) as info:
        Tools.load(ExecutionContext(tenant="t", principal="p"), policy=ToolPolicy.from_file(broken_weather))
    message = str(info.value)
    assert "allow.tools[0]: unknown tool 'acme.weather'; installed tools: " in message
    assert message.endswith(EXPECTED)


def test_gateway_load_names_the_broken_provider(broken_weather):
    """``Gateway.load`` says the same."""
    with pytest.raises(PolicyFileError, match="failed to load: ImportError: No module named 'acme_sdk'"):
        Gateway.load(policy=ToolPolicy.from_file(broken_weather))


def test_check_names_the_broken_provider(broken_weather, capsys):
    """``toolbox check`` exits 2 with the provider and its error on one line."""
    status = main(["check", "--policy", str(broken_weather)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("toolbox: error: ") and EXPECTED in err


def test_unrelated_broken_providers_are_mentioned_briefly():
    """A broken provider that does not look like the tool's is named, and `toolbox list` pointed to."""
    broken = [BrokenProvider("other-dist", "other-dist (entry point x = y)", "RuntimeError: boom", "x")]
    assert explain_missing("acme.weather", broken) == (
        "1 provider(s) failed to load (other-dist); `toolbox list` shows why"
    )
    assert explain_missing("acme.weather", []) == ""


@pytest.mark.parametrize(
    ("tool", "distribution", "entry_point"),
    [
        ("acme.weather", "acme-weather", None),
        ("weather", "toolbox-weather", None),
        ("acme-weather-v2", "acme-weather", None),
        ("forecast", "unrelated", "forecast"),
        ("Acme_Weather", "acme.weather", None),
    ],
)
def test_matching_by_distribution_or_entry_point(tool, distribution, entry_point):
    """Distribution and entry point names match the tool name at ``-`` boundaries, normalised."""
    broken = [BrokenProvider(distribution, "origin", "ImportError: x", entry_point)]
    assert explain_missing(tool, broken).startswith(f"provider {distribution}")


def test_the_providers_error_never_repeats_a_secret(tmp_path, monkeypatch):
    """URL credentials and secret-named environment values in a provider's error are masked."""
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    monkeypatch.setenv("ACME_API_TOKEN", "tok-7f3a9c2e")
    leaky = (
        "import os\n"
        "raise ImportError('index https://bob:hunter2@pkgs.example/simple?token=abc123&page=2 '"
        " + 'refused key ' + os.environ['ACME_API_TOKEN'])\n"
    )
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "acme-weather", {"acme_weather": leaky}, {"weather": "acme_weather"})
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[allow]\ntools = ["acme.weather"]\n')
    with on_sys_path(root), pytest.raises(PolicyFileError) as info:
        Tools.load(ExecutionContext(tenant="t", principal="p"), policy=ToolPolicy.from_file(policy))
    message = str(info.value)
    assert (
        "provider acme-weather (entry point weather) failed to load: ImportError: index https://pkgs"
        in message
    )
    for secret in ("hunter2", "bob", "abc123", "tok-7f3a9c2e"):
        assert secret not in message
    assert "refused key [REDACTED]" in message
