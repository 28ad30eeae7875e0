"""The README's demo runs offline and shows what it promises."""

import shutil
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_demo_runs_and_shows_each_step():
    """Denial by default, explicit allow, egress refusal, acknowledgement, and a redacted trace.

    The demo probes a cloud metadata address, so it runs in a network namespace
    holding only loopback (``unshare -rn``): a broken guard fails to connect
    instead of sending a packet. Without unshare the test fails.
    """
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is required: the demo probes egress refusal"
    command = [unshare, "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$1"', sys.executable, str(DEMO)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "HttpTool denied [POLICY_DENIED, rule default:deny]" in out
    assert "GET /rates -> 200" in out
    assert "metadata denied [EGRESS_DENIED, rule http:egress:address]" in out
    assert "FsTool denied [NOT_ACKNOWLEDGED]" in out
    assert "TOOLBOX_FS_ACK=allow-fs-within-roots" in out
    assert "FsTool wrote" in out
    assert "api_key=[REDACTED]" in out
    assert "demo-secret-123" not in out
