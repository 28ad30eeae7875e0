"""The README's demo runs offline and shows what it promises."""

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_demo_runs_and_shows_each_step():
    """Denial by default, explicit allow, acknowledgement, and a redacted trace."""
    result = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "HttpTool denied [POLICY_DENIED, rule default:deny]" in out
    assert "GET /rates -> 200" in out
    assert "FsTool denied [NOT_ACKNOWLEDGED]" in out
    assert "TOOLBOX_FS_ACK=allow-fs-within-roots" in out
    assert "FsTool wrote" in out
    assert "api_key=[REDACTED]" in out
    assert "demo-secret-123" not in out
