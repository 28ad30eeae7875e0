"""The pipeline's checks, one module per check: approvals, arguments, authorization (and Cedar),
guardrails, shared limits and the small built-in ones (kill switch, delegation, access, deadline,
budget). The engine (`toolbox.pipeline`) runs them; `Governance` composes them.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """The names of the old checks module (now `_builtin`), for one release (they warn)."""
    import warnings

    from toolbox.pipeline.checks import _builtin

    if name not in _builtin.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} is deprecated and will be removed in the next release; "
        f"import it from toolbox.pipeline.checks._builtin instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_builtin, name)
