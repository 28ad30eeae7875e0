"""mypy --strict rejects executing an undeclared intent and purpose() on a write (toolbox-http).

Correct usage type-checks clean; every misuse carries the ignore of the error it must cause
(see README.md: an unused ignore fails the mypy step).
"""

from __future__ import annotations

from toolbox import Tools
from toolbox_http import HttpResponse, HttpTool


def fetch(tools: Tools, u: str) -> HttpResponse:
    tools.get(HttpTool).post(u, json={"sku": 7}).audit_as("x").execute()
    tools.get(HttpTool).delete(u).audit_as("x").execute()
    tools.get(HttpTool).head(u).audit_as("x").execute()
    return tools.get(HttpTool).get(u).purpose("x").execute()


async def afetch(tools: Tools, u: str) -> int:
    response = await tools.get(HttpTool).get(u).purpose("x").aexecute()
    return response.status_code


def misuse(tools: Tools, u: str) -> None:
    # A read has no execute() until it states its purpose.
    tools.get(HttpTool).get(u).execute()  # type: ignore[attr-defined]
    # A write states audit_as(), never purpose().
    tools.get(HttpTool).post(u).purpose("x")  # type: ignore[attr-defined]
    tools.get(HttpTool).put(u).execute()  # type: ignore[attr-defined]
