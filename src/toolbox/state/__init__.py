"""Governance state for one process or a fleet: kill switches, shared limits and approvals.

Three backends implement the Protocols of `toolbox.pipeline._state_ports`:
`toolbox.state._memory` (the default, this process only),
`toolbox.state._sql_backend` (SQLAlchemy Core on SQLite or PostgreSQL) and
`toolbox.state._redis_backend` (redis-py; `toolbox.state._redis_async` is the
same store on its asyncio client). The policy file's ``[state]`` chooses one
(`toolbox.state._config`); see docs/fleet.md.
"""

from __future__ import annotations

from toolbox.state._config import GovernanceState, state_from_policy
from toolbox.state._kill import KillChange, change_kill_switch
from toolbox.state._memory import MemoryApprovalStore, MemoryKillSwitchStore, MemoryLimitStore

__all__ = [
    "GovernanceState",
    "KillChange",
    "MemoryApprovalStore",
    "MemoryKillSwitchStore",
    "MemoryLimitStore",
    "change_kill_switch",
    "state_from_policy",
]
