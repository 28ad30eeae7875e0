"""The pipeline's checks, one module per check: approvals, arguments, authorization (and Cedar),
guardrails, shared limits and the small built-in ones (kill switch, delegation, access, deadline,
budget). The engine (`toolbox.pipeline`) runs them; `Governance` composes them.
"""
