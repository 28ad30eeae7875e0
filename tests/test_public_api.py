"""The public surface: __all__ is complete, sorted and importable."""

import types

import toolbox


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
    assert issubclass(toolbox.PolicyFileError, ValueError)
    for name in toolbox.__all__:
        obj = getattr(toolbox, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj is not toolbox.ApprovalRequired:
            assert issubclass(obj, toolbox.ToolboxError), name
    # A control-flow signal: `except ToolboxError` must not swallow it.
    assert not issubclass(toolbox.ApprovalRequired, toolbox.ToolboxError)


def test_version():
    """__version__ comes from the installed distribution."""
    assert toolbox.__version__ == "0.1.0"
