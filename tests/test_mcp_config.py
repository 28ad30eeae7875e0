"""The policy file's ``[mcp]`` section: validated at load, errors name the key path."""

from __future__ import annotations

import pytest

from toolbox import ToolPolicy
from toolbox.errors import PolicyFileError
from toolbox.governance._mcp_table import McpConfig, McpContext, mcp_config
from toolbox.governance._policy_file import policy_from_mapping


def load(mcp: object) -> ToolPolicy:
    return policy_from_mapping({"version": 1, "mcp": mcp}, source="p.toml")


def test_valid_section():
    """Context and both toolset spellings are read into an McpConfig."""
    policy = load(
        {
            "context": {"tenant": "acme", "principal": "desk", "roles": ["analyst"]},
            "toolsets": {
                "support": {"tools": ["calculator", "http.get"], "description": "for support"},
                "math": ["calculator.evaluate"],
            },
        }
    )
    config = mcp_config(policy.governance)
    assert config.context == McpContext("acme", "desk", ("analyst",))
    assert dict(config.toolsets) == {"support": ("calculator", "http.get"), "math": ("calculator.evaluate",)}


def test_absent_section_is_empty():
    """Without [mcp] there is no context and no toolset."""
    assert mcp_config(ToolPolicy.standard().governance) == McpConfig()


@pytest.mark.parametrize(
    ("mcp", "message"),
    [
        ({"serve": {}}, "p.toml: mcp: unknown key(s) serve; expected context, toolsets"),
        ({"context": "acme"}, "p.toml: mcp.context: must be a table, got a string"),
        ({"context": {"tenant": "acme"}}, "p.toml: mcp.context.principal: missing"),
        ({"context": {"tenant": "", "principal": "p"}}, "mcp.context.tenant: must be 1-256 printable"),
        ({"context": {"tenant": "a\nb", "principal": "p"}}, "mcp.context.tenant: must be 1-256 printable"),
        (
            {"context": {"tenant": "a", "principal": "p", "roles": "admin"}},
            "roles: must be an array",
        ),
        ({"context": {"tenant": "a", "principal": "p", "user": "x"}}, "mcp.context: unknown key(s) user"),
        ({"toolsets": {"Bad Name": ["calculator"]}}, "mcp.toolsets.Bad Name: not a valid toolset name"),
        ({"toolsets": {"s": []}}, "mcp.toolsets.s: a toolset names at least one tool"),
        (
            {"toolsets": {"s": {"tools": ["../etc"]}}},
            "s.tools[0]: '../etc' is not a valid",
        ),
        (
            {"toolsets": {"s": {"tools": [1]}}},
            "s.tools[0]: must be a non-empty string",
        ),
        ({"toolsets": {"s": {"tool": ["a"]}}}, "mcp.toolsets.s: unknown key(s) tool"),
        ({"toolsets": {"s": "calculator"}}, "mcp.toolsets.s: must be a table, got a string"),
        ("yes", "p.toml: mcp: must be a table, got a string"),
    ],
)
def test_bad_values_name_the_key(mcp, message):
    """Every malformed value is a PolicyFileError naming where it is."""
    with pytest.raises(PolicyFileError) as raised:
        load(mcp)
    assert message in str(raised.value)
