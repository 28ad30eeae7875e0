"""mypy --strict rejects executing an undeclared intent and purpose() on a write."""

from __future__ import annotations

import textwrap

from mypy import api

GOOD = """
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
"""

BAD = """
    from toolbox import Tools
    from toolbox_http import HttpTool


    def misuse(tools: Tools, u: str) -> None:
        tools.get(HttpTool).get(u).execute()
        tools.get(HttpTool).post(u).purpose("x")
        tools.get(HttpTool).put(u).execute()
"""


def test_mypy_enforces_the_intent_phase(tmp_path):
    """Errors on exactly the misuse lines; the correct usage has none."""
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(textwrap.dedent(GOOD))
    bad.write_text(textwrap.dedent(BAD))
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--show-error-codes",
            "--no-pretty",
            str(good),
            str(bad),
        ]
    )
    assert stderr == ""
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if line.startswith(str(good))], stdout
    lines = {int(line.split(":")[1]) for line in errors if line.startswith(str(bad))}
    assert lines == {7, 8, 9}, stdout
    assert status == 1
    assert '"ReadIntent[HttpResponse]" has no attribute "execute"' in stdout
    assert '"WriteIntent[HttpResponse]" has no attribute "purpose"' in stdout
