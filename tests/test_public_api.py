"""The public surface: __all__ is complete, sorted and importable."""

import importlib
import types

import pytest

import toolbox

PUBLIC_MODULES = [
    "toolbox.audit",
    "toolbox.auth",
    "toolbox.doors",
    "toolbox.doors.tool_calls",
    "toolbox.errors",
    "toolbox.governance",
    "toolbox.provider",
    "toolbox.state",
    "toolbox.testing",
]


def test_all_is_sorted_and_complete():
    """Every public name is exported in __all__ (like httpx's test_exported_members)."""
    # Submodules appear in vars(toolbox) once imported; they are reached by their own path.
    public = {
        name
        for name, value in vars(toolbox).items()
        if not name.startswith(("_", "@")) and not isinstance(value, types.ModuleType)
    }
    assert set(toolbox.__all__) == public - {"annotations"}
    assert len(set(toolbox.__all__)) == len(toolbox.__all__)  # ruff's RUF022 keeps the order sorted


EXPORTED = [
    "Acknowledgement",
    "AcknowledgementRequiredError",
    "AcknowledgementState",
    "ApprovalRequired",
    "Budget",
    "CalculatorTool",
    "Catalog",
    "ContextResolver",
    "DenialRecord",
    "Effect",
    "ExecutionContext",
    "FunctionTool",
    "Gateway",
    "Governance",
    "OperationDescriptor",
    "ReadIntent",
    "Ready",
    "ReasonCode",
    "RiskClass",
    "Status",
    "ToolDecision",
    "ToolDeniedError",
    "ToolDescriptor",
    "ToolExecutionError",
    "ToolPolicy",
    "ToolPolicyDeniedError",
    "ToolProvider",
    "ToolResult",
    "ToolRuntime",
    "ToolUnavailableError",
    "ToolboxError",
    "Tools",
    "WriteIntent",
    "hookimpl",
    "tool",
]


def test_exported_members():
    """The top level is small (at most 35 names) and changes only on purpose (httpx's
    test_exported_members)."""
    assert toolbox.__all__ == EXPORTED
    assert len(toolbox.__all__) <= 35
    assert toolbox.__all__ == sorted(toolbox.__all__)
    assert "Invocation" not in toolbox.__all__  # the chain's mutable working state is not API


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_modules_export_sorted_importable_names(module_name):
    module = importlib.import_module(module_name)
    assert len(set(module.__all__)) == len(module.__all__), module_name  # ruff's RUF022 keeps it sorted
    for name in module.__all__:
        assert getattr(module, name) is not None, (module_name, name)
    assert "Invocation" not in module.__all__


def test_every_error_is_in_toolbox_errors():
    from toolbox import errors

    for name in toolbox.__all__:
        obj = getattr(toolbox, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert getattr(errors, name) is obj, name
    assert set(toolbox._MOVED_NAMES) & set(errors.__all__) == {
        name for name, home in toolbox._MOVED_NAMES.items() if home == "toolbox.errors"
    }


@pytest.mark.parametrize("name", sorted(toolbox._MOVED_NAMES))
def test_a_name_that_left_all_warns_for_one_release_and_is_the_same_object(name):
    home = importlib.import_module(toolbox._MOVED_NAMES[name])
    with pytest.warns(
        DeprecationWarning, match=rf"toolbox\.{name} is deprecated .* import it from {home.__name__}"
    ):
        obj = getattr(toolbox, name)
    assert obj is getattr(home, name)
    with pytest.warns(DeprecationWarning):
        exec(f"from toolbox import {name}", {})


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        toolbox.NoSuchThing  # noqa: B018


def test_issue_names_exist():
    """The names other packages depend on stay importable."""
    from toolbox import (  # noqa: F401
        Acknowledgement,
        AcknowledgementRequiredError,
        Effect,
        ExecutionContext,
        RiskClass,
        ToolboxError,
        ToolDescriptor,
        ToolPolicy,
        ToolPolicyDeniedError,
        ToolProvider,
        Tools,
        ToolUnavailableError,
    )


def test_error_hierarchy():
    """Denials are PermissionErrors, unavailability a LookupError, all ToolboxErrors."""
    assert issubclass(toolbox.ToolUnavailableError, LookupError)
    assert issubclass(toolbox.ToolPolicyDeniedError, PermissionError)
    assert issubclass(toolbox.AcknowledgementRequiredError, PermissionError)
    assert issubclass(toolbox.errors.PolicyFileError, ValueError)
    for name in toolbox.__all__:
        obj = getattr(toolbox, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj is not toolbox.ApprovalRequired:
            assert issubclass(obj, toolbox.ToolboxError), name
    # A control-flow signal: `except ToolboxError` must not swallow it.
    assert not issubclass(toolbox.ApprovalRequired, toolbox.ToolboxError)


def test_version():
    """__version__ comes from the installed distribution."""
    assert toolbox.__version__ == "0.1.0"
