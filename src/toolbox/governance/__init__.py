"""The assembly: `Governance` and the policy file's readers, above audit, state and auth.

`Governance` composes the pipeline's checks with an audit trail and fleet state;
the policy file (``ToolPolicy.from_file``) reads the ``[audit]``, ``[state]``,
``[auth]`` and ``[mcp]`` tables into them.
"""

from toolbox.governance._governance import Governance

__all__ = ["Governance"]
