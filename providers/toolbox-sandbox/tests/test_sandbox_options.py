"""Options, profiles and call arguments are refused with a message that names the field, never the value."""

from __future__ import annotations

import pytest

from toolbox import Status
from toolbox_sandbox import SandboxDeniedError, SandboxProfile, SandboxTool
from toolbox_sandbox._options import parse_options

SECRET_VALUE = "s3cr3t-value-never-echoed"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"profiles": {"Bad Name": {}}, "default_profile": "Bad Name"}, "profile names"),
        ({"default_profile": "missing"}, "default_profile"),
        ({"bwrap": "bwrap"}, "bwrap must be an absolute path"),
        ({"profiles": {"default": {"python": "python3"}}}, "python"),
        ({"profiles": {"default": {"read_only": ["/"]}}}, "root directory"),
        ({"profiles": {"default": {"read_only": ["/proc/1"]}}}, "mounts them itself"),
        ({"profiles": {"default": {"read_write": ["/scratch/x"]}}}, "mounts them itself"),
        ({"profiles": {"default": {"exports": ["../etc/*"]}}}, "exports"),
        ({"profiles": {"default": {"exports": ["/etc/passwd"]}}}, "exports"),
        ({"profiles": {"default": {"env": {"BAD-NAME": SECRET_VALUE}}}}, "environment variable names"),
        ({"profiles": {"default": {"network": "egress"}}}, "egress.hosts"),
        ({"profiles": {"default": {"egress": {"hosts": ["a.example"]}}}}, "network is 'none'"),
        (
            {
                "profiles": {
                    "default": {
                        "read_only_world": True,
                        "network": "egress",
                        "egress": {"hosts": ["a.example"]},
                    }
                }
            },
            "read_only_world needs",
        ),
        (
            {"profiles": {"default": {"read_only_world": True, "read_write": ["/srv"]}}},
            "read_only_world excludes",
        ),
        ({"profiles": {"default": {"limits": {"wall_seconds": 0}}}}, "wall_seconds"),
        ({"profiles": {"default": {"limits": {"memory_bytes": 1024}}}}, "memory_bytes"),
        ({"profiles": {"default": {"limits": {"processes": True}}}}, "processes"),
        ({"profiles": {"default": {"limits": {"output_bytes": 2**40}}}}, "output_bytes"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_options_name_the_field(options, field):
    with pytest.raises(ValueError, match="sandbox") as error:
        parse_options(options)
    assert field in str(error.value)
    assert SECRET_VALUE not in str(error.value)


@pytest.mark.parametrize(
    "network",
    ["127.0.0.0/8", "127.0.0.1/32", "0.0.0.0/0", "::1/128", "::/0", "::ffff:127.0.0.1/128", "10.0.0.0/8"],
)
def test_egress_never_allows_loopback(network):
    profile = {"network": "egress", "egress": {"hosts": ["a.example"], "allow_networks": [network]}}
    if network == "10.0.0.0/8":
        assert SandboxProfile.model_validate(profile).egress.allow_networks
        return
    with pytest.raises(ValueError, match="loopback"):
        SandboxProfile.model_validate(profile)


@pytest.fixture
def tool(sandbox_tools) -> SandboxTool:
    return sandbox_tools(max_code_bytes=64, max_input_bytes=100, max_input_files=2).get(SandboxTool)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.run_python(b"print(1)"), "source must be a str"),
        (lambda t: t.run_python("x" * 65), "over max_code_bytes=64"),
        (lambda t: t.run_python("", stdin=3), "stdin must be str or bytes"),
        (lambda t: t.run_python("", stdin="x" * 101), "over max_input_bytes=100"),
        (lambda t: t.run_python("", files=["a"]), "files must be a mapping"),
        (lambda t: t.run_python("", files={"a": "1", "b": "2", "c": "3"}), "over max_input_files=2"),
        (lambda t: t.run_python("", files={"../escape": "x"}), "files keys"),
        (lambda t: t.run_python("", files={"/etc/passwd": "x"}), "files keys"),
        (lambda t: t.run_python("", files={"a/./b": "x"}), "files keys"),
        (lambda t: t.run_python("", files={"a\x00b": "x"}), "files keys"),
        (lambda t: t.run_python("", files={"a/b/c/d/e/f/g/h/i": "x"}), "files keys"),
        (lambda t: t.run_python("", files={"a": "x", "a/b": "y"}), "a file and a path below it"),
        (lambda t: t.run_python("", files={"a": 5}), "files values must be str or bytes"),
        (lambda t: t.run_python("", profile="other"), "profile must be one of default"),
        (lambda t: t.run("/usr/bin/python3"), "argv must be a list"),
        (lambda t: t.run([]), "argv must hold 1 to 256"),
        (lambda t: t.run(["/usr/bin/python3", "a\x00"]), "without NUL"),
    ],
)
def test_bad_arguments_are_refused_before_any_intent(tool, call, message):
    with pytest.raises(ValueError) as error:
        call(tool)
    assert message in str(error.value)


def test_run_of_an_unlisted_program_is_a_recorded_denial(sandbox_tools):
    tools = sandbox_tools()
    tool = tools.get(SandboxTool)
    for program in ("/bin/sh", "/usr/bin/python3.11", "/usr/bin/../bin/python3", "python3"):
        with pytest.raises(SandboxDeniedError) as denied:
            tool.run([program, "-c", "print(1)"])
        assert (denied.value.reason_code, denied.value.rule) == ("SANDBOX_DENIED", "sandbox:programs")
    assert tools.executions(SandboxTool) == 0
    denials = [r for r in tools.context.trace if getattr(r, "reason_code", None) == "SANDBOX_DENIED"]
    assert len(denials) == 4


def test_by_name_refusals_are_invalid_arguments(sandbox_tools):
    from toolbox import Gateway

    gateway = Gateway(sandbox_tools().catalog)
    from toolbox.testing import test_context

    result = gateway.invoke(
        "sandbox.run_python",
        {"source": "", "files": {"../x": "y"}, "audit_as": "Escape"},
        context=test_context(),
    )
    assert result.status is Status.INVALID_ARGUMENTS
    assert result.attempts == 0
