"""Runs that end normally: inputs, outputs, exports, programs, limits, the audit record, concurrency."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from sandbox_support import ACK, ALLOW_SANDBOX

from toolbox import ExecutionContext, Governance, Tools
from toolbox.audit import AuditTrail, EventType, MemorySink
from toolbox.pipeline._result_summary import result_summary
from toolbox.testing import test_context
from toolbox_sandbox import (
    EgressAttempt,
    ExportedFile,
    SandboxResult,
    SandboxTool,
    SandboxUnavailableError,
    plugin,
)


def run(tool: SandboxTool, code: str, **kwargs) -> SandboxResult:
    return tool.run_python(code, **kwargs).audit_as("Run code").execute()


def test_stdin_files_and_exports(sandbox_tools, host):
    tool = sandbox_tools({"default": {"exports": ["out/*.csv", "summary.txt"]}}).get(SandboxTool)
    code = """
import csv, os, sys
rows = list(csv.reader(open("data/in.csv")))
os.makedirs("out")
with open("out/doubled.csv", "w", newline="") as out:
    csv.writer(out).writerows([[name, int(v) * 2] for name, v in rows])
open("summary.txt", "w").write(sys.stdin.read() + str(len(rows)))
open("not-exported.txt", "w").write("x")
"""
    result = run(tool, code, stdin="rows: ", files={"data/in.csv": "a,1\nb,2\n"})
    assert result.ok, result.stderr
    assert [(f.path, f.content) for f in result.files] == [
        ("out/doubled.csv", b"a,2\r\nb,4\r\n"),
        ("summary.txt", b"rows: 2"),
    ]
    assert result.files[0].sha256 == hashlib.sha256(b"a,2\r\nb,4\r\n").hexdigest()


def test_binary_inputs_and_non_utf8_output(sandbox_tools, host):
    tool = sandbox_tools({"default": {"exports": ["*.bin"]}}).get(SandboxTool)
    code = "import sys\ndata = open('in.bin','rb').read()\nopen('out.bin','wb').write(data[::-1])\n"
    code += "sys.stdout.buffer.write(b'\\xff\\xfeok')"
    result = run(tool, code, files={"in.bin": b"\x00\x01\xff"})
    assert [(f.path, f.content) for f in result.files] == [
        ("in.bin", b"\x00\x01\xff"),
        ("out.bin", b"\xff\x01\x00"),
    ]
    assert result.stdout == "\ufffd\ufffdok"


def test_export_caps_end_with_the_exports_limit(sandbox_tools, host):
    limits = {"export_files": 2, "export_bytes": 4096}
    tool = sandbox_tools({"default": {"exports": ["*"], "limits": limits}}).get(SandboxTool)
    result = run(tool, "for i in range(5):\n    open(f'f{i}', 'w').write('x')")
    assert result.limit == "exports"
    assert [f.path for f in result.files] == ["f0", "f1"]
    big = run(tool, "open('big', 'w').write('x' * 5000)")
    assert (big.limit, big.files) == ("exports", ())


def test_profile_environment_and_nothing_else(sandbox_tools, host):
    tool = sandbox_tools({"default": {"env": {"LANG": "C.UTF-8", "MODE": "report"}}}).get(SandboxTool)
    result = run(tool, "import os\nprint(sorted(os.environ.items()))")
    assert result.stdout.strip() == "[('LANG', 'C.UTF-8'), ('MODE', 'report'), ('PWD', '/scratch')]"


def test_run_a_listed_program(sandbox_tools, host):
    tool = sandbox_tools({"default": {"programs": ["/usr/bin/sort"], "exports": ["sorted.txt"]}}).get(
        SandboxTool
    )
    result = (
        tool.run(["/usr/bin/sort", "words.txt"], files={"words.txt": "pear\napple\n"})
        .audit_as("Sort")
        .execute()
    )
    assert (result.exit_code, result.stdout) == (0, "apple\npear\n")
    failing = tool.run(["/usr/bin/sort", "missing.txt"]).audit_as("Sort nothing").execute()
    assert failing.exit_code == 2 and "missing.txt" in failing.stderr
    python = tool.run(["/usr/bin/python3", "-c", "import os; print(os.getuid())"]).audit_as("Who").execute()
    assert python.stdout == "1000\n"


def test_open_files_file_size_and_processes_are_limited(sandbox_tools, host):
    limits = {"open_files": 16, "file_bytes": 65536, "processes": 8}
    tool = sandbox_tools({"default": {"limits": limits}}).get(SandboxTool)
    code = """
import json, os, subprocess
opened = []
try:
    while True:
        opened.append(open("/dev/null"))
except OSError as exc:
    files = (len(opened), exc.errno)
for f in opened:
    f.close()
try:
    with open("big", "wb") as out:
        out.write(b"x" * 100000)
    size = "written"
except OSError as exc:
    size = exc.errno
children = []
try:
    for _ in range(20):
        pid = os.fork()
        if pid == 0:
            import time
            time.sleep(5)
            os._exit(0)
        children.append(pid)
except OSError as exc:
    forks = (len(children), exc.errno)
print(json.dumps({"files": files, "size": size, "forks": forks}))
"""
    result = run(tool, code)
    assert result.exit_code == 0, result.stderr
    import json

    seen = json.loads(result.stdout)
    assert seen["files"][1] == 24 and seen["files"][0] < 16  # EMFILE
    assert seen["size"] == 27  # EFBIG
    assert seen["forks"][1] == 11 and seen["forks"][0] < 8  # EAGAIN


def _audited(options: dict | None = None) -> tuple[Tools, MemorySink, ExecutionContext]:
    sink = MemorySink()
    context = test_context()
    tools = Tools.load(
        context,
        providers=[plugin],
        discover=False,
        env=ACK,
        policy=ALLOW_SANDBOX,
        options={"sandbox": options} if options else None,
        governance=Governance(audit=AuditTrail(sink)),
    )
    return tools, sink, context


def test_the_audit_records_the_source_the_inputs_by_digest_and_the_confinement(host):
    """The declared intent binds the exact code and the inputs' digests; the response summarises the
    run (how it ended and was confined, counts) with the result's hash; no input or output content."""
    tools, sink, context = _audited()
    stdin, data = "stdin-canary-7f3a", "file-canary-91c2"
    result = (
        tools.get(SandboxTool)
        .run_python(
            "import sys\nprint('OUTPUT' + '-CANARY', sys.stdin.read())", stdin=stdin, files={"in.txt": data}
        )
        .audit_as("Audit me")
        .execute()
    )
    assert result.stdout == f"OUTPUT-CANARY {stdin}\n"
    events = sink.read_trace(context.run_id)
    (declared,) = [e for e in events if e.type is EventType.INTENT_DECLARED]
    assert json.loads(declared.payload_summary or "") == {
        "source": "import sys\nprint('OUTPUT' + '-CANARY', sys.stdin.read())",
        "stdin": {"sha256": hashlib.sha256(stdin.encode()).hexdigest(), "size": len(stdin)},
        "files": {"in.txt": {"sha256": hashlib.sha256(data.encode()).hexdigest(), "size": len(data)}},
        "profile": None,
    }
    assert declared.intent_text == "Audit me"
    (response,) = [e for e in events if e.type is EventType.INVOCATION_RESPONSE]
    summary = response.payload_summary or ""
    for fact in ("exit_code=0", "limit=None", "profile=default", "enforcement=rlimits+supervisor"):
        assert fact in summary
    assert "seccomp=True" in summary and "network=none" in summary
    assert f"stdout_bytes={len(result.stdout)}" in summary and "files=0" in summary
    assert response.payload_hash == hashlib.sha256(result.model_dump_json().encode()).hexdigest()
    stored = repr([e.model_dump() for e in sink.records]) + repr(context.trace.records())
    assert stdin not in stored and data not in stored  # inputs by digest only
    assert "OUTPUT-CANARY" not in stored  # the output is never stored


def test_the_audit_records_the_limit_a_run_hit(host):
    tools, sink, context = _audited({"profiles": {"default": {"limits": {"output_bytes": 1024}}}})
    result = tools.get(SandboxTool).run_python("print('x' * 5000)").audit_as("Flood").execute()
    assert (result.limit, result.stdout_truncated) == ("output", True)
    (response,) = [e for e in sink.read_trace(context.run_id) if e.type is EventType.INVOCATION_RESPONSE]
    summary = response.payload_summary or ""
    assert "limit=output" in summary and "exit_code=None" in summary
    assert "stdout_bytes=1024" in summary and "stdout_truncated=True" in summary
    assert "xxxx" not in summary


def test_a_result_summarises_counts_and_flags_never_content():
    """What the audit trail stores of a result: no stdout, stderr, file content, path or egress host."""
    result = SandboxResult(
        exit_code=3,
        stdout="STDOUT-CANARY é",
        stderr="STDERR-CANARY",
        stdout_truncated=True,
        wall_seconds=1.23456,
        cpu_seconds=0.5,
        limit="exports",
        files=(ExportedFile(path="PATH-CANARY.csv", size=4, sha256="ab" * 32, content=b"FILE"),),
        profile="fetcher",
        seccomp=False,
        network="egress",
        egress=(
            EgressAttempt(method="CONNECT", host="HOST-CANARY.example", port=443, allowed=True),
            EgressAttempt(method="GET", host="127.0.0.1", port=80, allowed=False, rule="http:egress:address"),
        ),
    )
    summary, digest = result.__toolbox_audit_summary__()
    assert summary == (
        "exit_code=3 limit=exports profile=fetcher enforcement=rlimits+supervisor seccomp=False "
        "network=egress stdout_bytes=16 stderr_bytes=13 stdout_truncated=True stderr_truncated=False "
        "files=1 file_bytes=4 egress_allowed=1 egress_refused=1 wall_seconds=1.235 cpu_seconds=0.500"
    )
    assert digest == hashlib.sha256(result.model_dump_json().encode()).hexdigest()
    assert result_summary(result) == (summary, digest)  # what the chain's audit hook stores


def test_concurrent_runs_do_not_see_each_other(sandbox, host):
    code = "import os, time\nopen('mine', 'w').write('x')\ntime.sleep(0.3)\nprint(sorted(os.listdir('.')))"
    results: list[SandboxResult] = []

    def one() -> None:
        results.append(run(sandbox, code))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.stdout for r in results] == ["['mine']\n"] * 4


def test_a_missing_bubblewrap_or_interpreter_is_reported_and_runs_nothing(sandbox_tools):
    tools = sandbox_tools(bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        tools.get(SandboxTool).run_python("print(1)").audit_as("Nothing").execute()
    tools = sandbox_tools({"default": {"python": "/nonexistent/python3"}})
    with pytest.raises(SandboxUnavailableError, match="not an executable file"):
        tools.get(SandboxTool).run_python("print(1)").audit_as("Nothing").execute()
    tools = sandbox_tools({"default": {"read_only": ["/nonexistent/dir"]}})
    with pytest.raises(SandboxUnavailableError, match="read_only path /nonexistent/dir does not exist"):
        tools.get(SandboxTool).run_python("print(1)").audit_as("Nothing").execute()
    tools = sandbox_tools({"default": {"read_write": ["/nonexistent/rw"]}})
    with pytest.raises(SandboxUnavailableError, match="Can't find source path /nonexistent/rw"):
        tools.get(SandboxTool).run_python("print(1)").audit_as("Nothing").execute()
    assert tools.executions(SandboxTool) == 1  # started, and failed before any code ran


def test_a_read_write_directory_is_the_only_host_path_the_code_changes(sandbox_tools, host, request):
    # The run's fresh user must reach and write it: not below pytest's private temporary directory.
    shared = Path(tempfile.mkdtemp(prefix="sandbox-rw-"))
    shared.chmod(0o777)
    request.addfinalizer(lambda: shutil.rmtree(shared))
    tool = sandbox_tools({"default": {"read_write": [str(shared)]}}).get(SandboxTool)
    code = f"open({str(shared / 'out.txt')!r}, 'w').write('written')\nopen({str(host.sentinel)!r}, 'w')"
    result = run(tool, code)
    assert (shared / "out.txt").read_text() == "written"
    assert result.exit_code == 1 and "FileNotFoundError" in result.stderr  # the sentinel is not there


def test_run_reports_a_program_ended_by_a_signal_in_the_shell_convention(sandbox_tools, host):
    tool = sandbox_tools().get(SandboxTool)
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"
    result = tool.run(["/usr/bin/python3", "-c", code]).audit_as("End by a signal").execute()
    assert (result.exit_code, result.limit) == (128 + 15, None)


@pytest.mark.parametrize(
    "answer",
    [
        "",  # no answer
        '{"stdlib": "/usr/lib/python3.11"}',  # facts but no compiled init
        '{"stdlib": "/usr/lib", "multiarch": "", "libdir": "", "ldlibrary": "", "shared": false, '
        '"version": [3, 11], "init": "00"}',  # an init too short to be a .pyc
        '{"init": "not hex"}',
    ],
    ids=["silent", "no init", "short init", "garbage"],
)
def test_an_interpreter_that_cannot_compile_the_init_is_reported_and_runs_nothing(
    sandbox_tools, tmp_path, answer
):
    fake = tmp_path / "python3"
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\nprintf '%s' '{answer}'\n")
    fake.chmod(0o755)
    tools = sandbox_tools({"default": {"python": str(fake)}})
    with pytest.raises(SandboxUnavailableError, match="could not be asked where its library is, or compile"):
        tools.get(SandboxTool).run_python("print(1)").audit_as("Nothing").execute()


@pytest.mark.parametrize(
    "missing",
    [(), ("UNSHARE",), ("UNSHARE", "SETPRIV")],
    ids=["unshare", "setpriv where unshare is missing", "Popen where both are missing"],
)
def test_the_run_is_the_fresh_host_user_whichever_program_switches_to_it(
    sandbox_tools, host, monkeypatch, request, missing
):
    from toolbox_sandbox import _supervisor

    for name in missing:
        monkeypatch.setattr(_supervisor, name, f"/nonexistent/{name.lower()}")
    # What the code writes to a read_write directory is owned, on the host, by the user it ran as.
    shared = Path(tempfile.mkdtemp(prefix="sandbox-rw-"))
    shared.chmod(0o777)
    request.addfinalizer(lambda: shutil.rmtree(shared))
    tool = sandbox_tools({"default": {"read_write": [str(shared)]}}).get(SandboxTool)
    code = f"import os\nprint(os.getuid(), os.getgid(), os.getgroups())\nopen({str(shared / 'f')!r}, 'w')"
    result = run(tool, code)
    assert (result.exit_code, result.stdout) == (0, "1000 1000 []\n")
    owner = (shared / "f").stat()
    assert len(host.uids) == 1  # a fresh host user (the fixture checks no process of it is left)
    assert (owner.st_uid, owner.st_gid) == (next(iter(host.uids)),) * 2


@pytest.mark.parametrize(
    ("code", "status", "stderr"),
    [
        ("import sys\nsys.exit()", 0, ""),
        ("import sys\nsys.exit(3)", 3, ""),
        ("import sys\nsys.exit(259)", 3, ""),
        ("import sys\nsys.exit(-1)", 255, ""),
        ("import sys\nsys.exit('stopped: bad input')", 1, "stopped: bad input\n"),
        ("raise SystemExit(None)", 0, ""),
    ],
)
def test_sys_exit_ends_the_run_with_the_status_python_gives_it(sandbox, host, code, status, stderr):
    result = run(sandbox, code)
    assert (result.exit_code, result.stderr, result.limit) == (status, stderr, None)


def test_the_end_of_the_code_is_an_ordinary_python_exit(sandbox_tools, host, request):
    # The init ends the process without the interpreter's teardown; what a program sees of its exit
    # stays: non-daemon threads finish, atexit handlers run, a file a global still holds open is
    # flushed, and unflushed output (no newline) reaches stdout and stderr.
    shared = Path(tempfile.mkdtemp(prefix="sandbox-rw-"))
    shared.chmod(0o777)
    request.addfinalizer(lambda: shutil.rmtree(shared))
    tool = sandbox_tools({"default": {"read_write": [str(shared)]}}).get(SandboxTool)
    code = f"""
import atexit, sys, threading
log = open({str(shared / "log.txt")!r}, "w")
log.write("kept")
release = threading.Event()
def late():
    release.wait()
    print("thread done", flush=True)
threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
release.set()
sys.stdout.write("no newline")
sys.stderr.write("err no newline")
"""
    result = run(tool, code)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("thread done\n") or result.stdout.startswith("no newline")
    assert sorted(result.stdout.replace("no newline", "no newline\n").split("\n")) == [
        "",
        "atexit ran",
        "no newline",
        "thread done",
    ]
    assert result.stderr == "err no newline"
    assert (shared / "log.txt").read_text() == "kept"


def test_an_atexit_handler_that_fails_is_reported_and_the_status_kept(sandbox, host):
    code = "import atexit\natexit.register(lambda: 1 / 0)\nprint('done')"
    result = run(sandbox, code)
    assert (result.exit_code, result.stdout) == (0, "done\n")
    assert "ZeroDivisionError" in result.stderr


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nsys.modules['__main__'] = None\nprint('replaced')",
        "import sys\ndel sys.modules['__main__']\nprint('replaced')",
        "import sys\nsys.stdout.close()\nprint('gone', file=sys.stderr)",
    ],
)
def test_code_that_breaks_what_the_end_uses_still_ends_cleanly(sandbox, host, code):
    result = run(sandbox, code)
    assert result.exit_code == 0, result.stderr
    assert result.limit is None
