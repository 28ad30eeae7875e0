"""Governance state for one process or a fleet: kill switches, shared limits and approvals.

Three backends implement the Protocols of `toolbox.pipeline.state_ports`:
`toolbox.state.memory` (the default, this process only),
`toolbox.state.sql_backend` (SQLAlchemy Core on SQLite or PostgreSQL) and
`toolbox.state.redis_backend` (redis-py; `toolbox.state.redis_async` is the
same store on its asyncio client). The policy file's ``[state]`` chooses one
(`toolbox.state.config`); see docs/fleet.md.
"""

from __future__ import annotations

from toolbox.state.memory import MemoryApprovalStore, MemoryKillSwitchStore, MemoryLimitStore

__all__ = ["MemoryApprovalStore", "MemoryKillSwitchStore", "MemoryLimitStore"]
