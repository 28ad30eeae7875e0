"""Policy files: the TOML schema and its errors."""

import pytest

from toolbox import RiskClass, ToolDescriptor, ToolPolicy, Tools
from toolbox.errors import PolicyFileError
from toolbox.testing import fake_provider, test_context


def write(tmp_path, text):
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


EXT = ToolDescriptor(name="http", version="1", risk=RiskClass.EXTERNAL_RESOURCE, operations=[{"name": "get"}])
MEM = ToolDescriptor(name="calc", version="1", risk=RiskClass.MEMORY_ONLY, operations=[{"name": "x"}])


def test_full_schema(tmp_path):
    """Every section of the schema is read."""
    policy = ToolPolicy.from_file(
        write(
            tmp_path,
            """
        version = 1
        base = "standard"
        [allow]
        tools = ["http"]
        risks = ["PRIVILEGED"]
        [deny]
        tools = ["calc"]
        [providers]
        block = ["Evil-Tools"]
    """,
        )
    )
    assert policy.decide(EXT).rule == "allow:tool:http"
    assert policy.decide(MEM).rule == "deny:tool:calc"
    assert policy.is_blocked("evil_tools")
    assert policy.source == str(tmp_path / "policy.toml")


def test_deny_all_base(tmp_path):
    """base = "deny_all" allows nothing by default."""
    policy = ToolPolicy.from_file(write(tmp_path, 'version = 1\nbase = "deny_all"\n'))
    assert policy.decide(MEM).rule == "default:deny"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('version = 1\nbsae = "standard"\n', "unknown key\\(s\\) bsae"),
        ('version = 1\n[allow]\ntool = ["http"]\n', "allow: unknown key\\(s\\) tool"),
        ('version = 1\n[allow]\nrisks = ["HARMLESS"]\n', r"allow.risks\[0\]: unknown risk class 'HARMLESS'"),
        ('version = 1\n[deny]\nrisks = ["PRIVILEGED", "root"]\n', r"deny.risks\[1\]: unknown risk class"),
        (
            'version = 1\n[allow]\ntools = ["http"]\n[deny]\ntools = ["http"]\n',
            "both \\[allow\\] and \\[deny\\]",
        ),
        ('version = 1\n[allow]\nrisks = ["PRIVILEGED"]\n[deny]\nrisks = ["PRIVILEGED"]\n', "both"),
        (
            'version = 1\n[allow]\ntools = ["Not A Name"]\n',
            r"allow.tools\[0\]: 'Not A Name' is not a valid tool name",
        ),
        ("version = 2\n", "version: unsupported version 2"),
        ('base = "standard"\n', "version: missing"),
        ('version = 1\nbase = "allow_all"\n', "base: unknown base 'allow_all'"),
        ('version = 1\n[allow]\ntools = "http"\n', "allow.tools: must be an array of strings, got a string"),
        ("version = [", "not valid TOML"),
    ],
)
def test_malformed_files(tmp_path, text, message):
    """Unknown keys, unknown risks, contradictions and bad types are errors naming the key."""
    with pytest.raises(PolicyFileError, match=message):
        ToolPolicy.from_file(write(tmp_path, text))


def test_missing_file(tmp_path):
    """A missing policy file is an error, not a silent default."""
    with pytest.raises(PolicyFileError, match="does not exist"):
        ToolPolicy.from_file(tmp_path / "nope.toml")


def test_unknown_tool_name_rejected_on_load(tmp_path):
    """A policy file naming a tool nobody provides fails Tools.load, naming the key."""
    path = write(tmp_path, 'version = 1\n[allow]\ntools = ["fake", "htpp"]\n')
    with pytest.raises(PolicyFileError, match=r"allow.tools\[1\]: unknown tool 'htpp'"):
        Tools.load(
            test_context(),
            policy=ToolPolicy.from_file(path),
            providers=[fake_provider("fake")],
            discover=False,
            env={},
        )


def test_toolbox_policy_env_is_read(tmp_path):
    """Without a policy argument, Tools.load reads the file named by TOOLBOX_POLICY."""
    path = write(tmp_path, 'version = 1\n[allow]\ntools = ["ext"]\n')
    provider = fake_provider("ext", risk=RiskClass.EXTERNAL_RESOURCE)
    tools = Tools.load(
        test_context(), providers=[provider], discover=False, env={"TOOLBOX_POLICY": str(path)}
    )
    assert tools.explain("ext").allowed
    assert tools.explain("ext").rule == "allow:tool:ext"


def test_toolbox_policy_env_missing_file(tmp_path):
    """TOOLBOX_POLICY naming a missing file is an error, never a fallback to defaults."""
    with pytest.raises(PolicyFileError, match="does not exist"):
        Tools.load(test_context(), discover=False, env={"TOOLBOX_POLICY": str(tmp_path / "gone.toml")})


def test_without_env_the_standard_policy_applies():
    """No policy and no TOOLBOX_POLICY means ToolPolicy.standard()."""
    provider = fake_provider("ext", risk=RiskClass.EXTERNAL_RESOURCE)
    tools = Tools.load(test_context(), providers=[provider], discover=False, env={})
    assert tools.explain("ext").rule == "default:deny"


@pytest.mark.parametrize(
    "text", ['version = 1\n[providers]\nblock = [" "]\n', 'version = 1\nallow = ["http"]\n']
)
def test_errors_name_file_and_key(tmp_path, text):
    """Blank distribution names and a list where a table belongs name the file and the key."""
    with pytest.raises(PolicyFileError) as info:
        ToolPolicy.from_file(write(tmp_path, text))
    message = str(info.value)
    assert str(tmp_path) in message
    assert "providers.block[0]: ' ' is not a valid distribution name" in message or (
        "allow: must be a table, got an array" in message
    )


def test_tool_options_table(tmp_path):
    """[tools.<name>] tables become that tool's options; options given in code win, tables merge."""
    path = write(
        tmp_path,
        """
        version = 1
        [allow]
        tools = ["fake"]
        [tools.fake]
        limit = 3
        mode = "file"
        [tools.fake.nested]
        a = 1
        b = 2
    """,
    )
    policy = ToolPolicy.from_file(path)
    assert policy.governance["tools"] == {"fake": {"limit": 3, "mode": "file", "nested": {"a": 1, "b": 2}}}
    tools = Tools.load(
        test_context(),
        policy=policy,
        providers=[fake_provider("fake")],
        discover=False,
        env={},
        options={"fake": {"mode": "code", "nested": {"b": 20}}},
    )
    assert tools.catalog.options_for("fake") == {"limit": 3, "mode": "code", "nested": {"a": 1, "b": 20}}


def test_tool_options_for_unknown_tool(tmp_path):
    """A [tools.<name>] table for a tool nobody provides fails Tools.load, naming the key."""
    path = write(tmp_path, "version = 1\n[tools.htpp]\nread_timeout = 1\n")
    with pytest.raises(PolicyFileError, match=r"tools.htpp: unknown tool 'htpp'"):
        Tools.load(
            test_context(),
            policy=ToolPolicy.from_file(path),
            providers=[fake_provider("fake")],
            discover=False,
            env={},
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version = 1\n[tools]\nhttp = 1\n", "tools.http: must be a table, got an integer"),
        ('version = 1\n[tools."Bad Name"]\nx = 1\n', "tools.Bad Name: not a valid tool name"),
    ],
)
def test_tool_options_must_be_tables(tmp_path, text, message):
    """Each [tools] entry is a table keyed by a valid tool name."""
    with pytest.raises(PolicyFileError, match=message):
        ToolPolicy.from_file(write(tmp_path, text))
