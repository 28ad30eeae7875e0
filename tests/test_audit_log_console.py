"""The console's trace page says which signed checkpoint covers the trace (issue 31, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from audit_log_support import signing_key
from service_support import deployment
from toolbox.audit import SqliteSink
from toolbox.audit._log import MerkleLog


def test_the_trace_page_names_the_checkpoint_and_its_signer(tmp_path: Path) -> None:
    with deployment(tmp_path, console=True) as service:
        call = service.invoke("alice", "echo", {"text": "x"}, purpose="Greet")
        assert call.status_code == 200
        trace_id = call.json()["trace_id"]
        with httpx.Client(base_url=service.url) as client:
            login = client.get("/console/login")
            token = re.search(r'name="csrf" value="([^"]+)"', login.text)
            assert token
            client.post("/console/login", data={"csrf": token.group(1), "token": service.keys["bob"]})
            page = client.get(f"/console/audit/{trace_id}")
            assert page.status_code == 200 and "Merkle log: not in a signed checkpoint yet" in page.text
            assert isinstance(service.sink, SqliteSink)
            signer, _ = signing_key(tmp_path)
            size = MerkleLog(service.sink).sequence()
            MerkleLog(service.sink).checkpoint(signer, "audit.example.com/prod")
            page = client.get(f"/console/audit/{trace_id}")
            assert f"Merkle log: included in checkpoint {size}, signed by audit-log at " in page.text
