"""One worker process of the fleet tests: governed calls of ``add`` under a policy file's ``[state]``.

Run as ``python tests/state_worker.py MODE POLICY [options]``; prints JSON lines.

- ``burst --calls N [--seconds S]``: N calls (for at most S seconds) as fast as it can, then a summary.
- ``loop --stop FILE``: one call every few milliseconds until FILE exists, a line per call.
- ``redeem --request ID --fingerprint FP --go FILE``: wait for FILE, redeem the grant once.
- ``decide --request ID --go FILE --principal NAME``: wait for FILE, approve the request as NAME.
- ``ask --go FILE --a N``: wait for FILE, make one call (argument ``a`` = N) that needs an approval.

The waiting modes first create ``FILE.ready.PID`` (`at_start_line` counts them), so the test
creates FILE once every worker is at the start line.

Every line carries ``executions``: how many times the tool's code ran in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.governance import Approval, HmacApprover
from toolbox.state._config import state_from_config

#: What a worker imports, at the top and lazily as it runs on each backend: the zygote the fleet
#: tests fork workers from (tests/zygote.py) imports them once instead of every start.
PRELOAD = (
    "toolbox",
    "toolbox.governance",
    "toolbox.state._config",
    "toolbox.state._redis_backend",
    "toolbox.state._sql_backend",
    "redis",
    "opentelemetry.sdk.metrics",
    "psycopg",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlalchemy.dialects.sqlite.pysqlite",
)
#: Every worker (and the test) shares the fingerprint key through this approver's secret.
SECRET = b"fleet-test-secret-0123456789abcdef"
CALL = {"a": 1, "b": 2, "purpose": "Sum the order"}
executions: list[float] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    executions.append(time.time())
    return a + b


def governance(policy: str) -> tuple[ToolPolicy, Governance]:
    """The policy and the governance it describes, with the shared approver."""
    loaded = ToolPolicy.from_file(policy)
    # The catalog applies the rest of the policy (audit, guardrails); the state is opened here
    # so that its owner can close it.
    state = state_from_config(loaded.governance["state"], source=str(policy))
    return loaded, Governance(approver=HmacApprover(SECRET), state=state)


def gateway(policy: str) -> Gateway:
    """The worker's gateway: the policy file's [state], the shared approver."""
    loaded, governed = governance(policy)
    return Gateway.load(policy=loaded, providers=[add], discover=False, governance=governed)


def decide(policy: str, request_id: str, go: Path, reviewer: str) -> int:
    """Race the other reviewers to approve ``request_id``: print whether this one won."""
    from toolbox.pipeline._state_ports import ApprovalDecisionError

    _, governed = governance(policy)
    state = governed.state
    assert state is not None and state.approvals is not None
    wait_for(go)
    try:
        state.approvals.decide(request_id, approve=True, decided_by=reviewer, reason="race")
        emit(decided=True, reason=None)
    except ApprovalDecisionError as exc:
        emit(decided=False, reason=exc.reason_code)
    state.close()
    return 0


def wait_for(go: Path) -> None:
    """Say this worker is at the start line (a file `at_start_line` counts), then wait for ``go``."""
    go.with_name(f"{go.name}.ready.{os.getpid()}").touch()
    while not go.exists():
        time.sleep(0.001)


def at_start_line(go: Path) -> int:
    """How many workers wait for ``go`` (the test creates it once all of them do)."""
    return len(list(go.parent.glob(f"{go.name}.ready.*")))


def emit(**fields: object) -> None:
    print(json.dumps({**fields, "executions": len(executions)}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("burst", "loop", "redeem", "decide", "ask"))
    parser.add_argument("policy")
    parser.add_argument("--calls", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--stop")
    parser.add_argument("--go")
    parser.add_argument("--request")
    parser.add_argument("--fingerprint")
    parser.add_argument("--principal", default=f"worker{os.getpid()}")
    parser.add_argument("--a", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "decide":
        return decide(args.policy, args.request, Path(args.go), args.principal)
    gw = gateway(args.policy)
    context = ExecutionContext(tenant="acme", principal=args.principal, run_id="fleet-run")
    if args.mode == "burst":
        statuses: dict[str, int] = {}
        spans: list[tuple[float, float]] = []  # (before the call, when the tool ran) of each success
        until = time.monotonic() + args.seconds if args.seconds else float("inf")
        for _ in range(args.calls):
            if time.monotonic() >= until:
                break
            before = time.time()
            result = gw.invoke("add", CALL, context=context)
            key = result.reason_code or result.status.value
            statuses[key] = statuses.get(key, 0) + 1
            if result.status.value == "SUCCESS":
                spans.append((before, executions[-1]))
        emit(statuses=statuses, spans=spans)
    elif args.mode == "loop":
        while not Path(args.stop).exists():
            result = gw.invoke("add", CALL, context=context)
            emit(status=result.status.value, reason=result.reason_code, at=time.time())
            time.sleep(0.005)
    elif args.mode == "ask":
        wait_for(Path(args.go))
        result = gw.invoke("add", {**CALL, "a": args.a}, context=context)
        request = result.approval.id if result.approval is not None else None
        emit(status=result.status.value, reason=result.reason_code, request=request, a=args.a)
    else:
        wait_for(Path(args.go))
        grant = Approval.of_request(args.request, args.fingerprint)
        result = gw.invoke("add", CALL, context=context, approval=grant)
        emit(status=result.status.value, reason=result.reason_code, message=result.message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
