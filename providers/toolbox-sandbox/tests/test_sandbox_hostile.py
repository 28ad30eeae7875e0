"""Hostile code: each attack fails inside the sandbox, the host is unchanged, nothing outlives the call.

Every test uses the ``host`` fixture, which checks after the test that the
host's sentinel files and /tmp are unchanged and that no process of any
sandbox's user is left. The code under test prints what it managed; the
assertions say what it must not have managed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from sandbox_support import TIGHT, Host

from toolbox_sandbox import SandboxTool

CANARY = "canary-secret-7f3a9c"


def run(sandbox: SandboxTool, code: str, **kwargs):
    return sandbox.run_python(code, **kwargs).audit_as("Run hostile code in the sandbox").execute()


@pytest.fixture
def spinning_sandbox(sandbox_tools) -> SandboxTool:
    """TIGHT with 1 s of CPU, the least RLIMIT_CPU takes: for code that spins until a limit ends it,
    where which limit does is not what the test is about (each second is a second of the suite's CPU)."""
    return sandbox_tools({"default": {"limits": {**TIGHT, "cpu_seconds": 1}}}).get(SandboxTool)


def outcome(result) -> dict:
    """The JSON the code printed last."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, (result.stdout, result.stderr)
    return json.loads(lines[-1])


PROBE = """
import json, os
def attempt(call):
    try:
        value = call()
        return "OK:" + repr(value)[:200]
    except BaseException as exc:
        return type(exc).__name__ + ":" + str(getattr(exc, "errno", ""))
"""


def test_reads_of_host_secrets_fail(sandbox, host: Host):
    """/etc/shadow, the host's home, the project's venv and the host's files do not exist inside."""
    venv = os.path.dirname(os.path.dirname(sys.executable))
    code = (
        PROBE
        + f"""
paths = ["/etc/shadow", "/etc/passwd", "/root", "/home", {venv!r}, {str(host.sentinel)!r}, "/work"]
print(json.dumps({{p: attempt(lambda p=p: open(p).read() if "." in p.rsplit("/", 1)[-1] else os.listdir(p))
                  for p in paths}}))
print(json.dumps(sorted(os.listdir("/"))))
"""
    )
    result = run(sandbox, code)
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    attempts = json.loads(lines[0])
    assert all(value.startswith("FileNotFoundError") for value in attempts.values()), attempts
    assert json.loads(lines[1]) == ["dev", "lib", "lib64", "proc", "sandbox", "scratch", "usr"]
    assert "host data" not in result.stdout


def test_other_processes_environ_and_a_canary_secret_stay_out(sandbox, host: Host, monkeypatch):
    """The parent's environment (a canary) reaches no process inside, and /proc shows only the sandbox."""
    monkeypatch.setenv("TOOLBOX_SANDBOX_CANARY", CANARY)
    code = (
        PROBE
        + f"""
import glob
environs = {{}}
for path in glob.glob("/proc/[0-9]*/environ"):
    environs[path] = attempt(lambda path=path: open(path, "rb").read().decode("latin-1"))
print(json.dumps({{"env": dict(os.environ), "pids": sorted(glob.glob("/proc/[0-9]*")),
                  "host_pid": attempt(lambda: open("/proc/{os.getpid()}/environ", "rb").read()),
                  "environs": environs}}))
"""
    )
    result = run(sandbox, code)
    seen = outcome(result)
    # Only what the profile lists (nothing here) and bubblewrap's PWD.
    assert seen["env"] == {"PWD": "/scratch"}
    assert seen["pids"] == ["/proc/1"]  # the code itself is PID 1; no host process is visible
    assert seen["host_pid"].startswith("FileNotFoundError") or os.getpid() == 1
    assert CANARY not in result.stdout + result.stderr
    assert CANARY not in json.dumps(seen["environs"])


def test_writes_outside_scratch_fail(sandbox, host: Host):
    """The root, the library directories and the code itself are read-only; /scratch is the only place."""
    code = (
        PROBE
        + """
targets = ["/evil", "/usr/lib/evil", "/sandbox/main.py", "/sandbox/init.pyc", "/sandbox/new"]
targets += ["/proc/sys/kernel/hostname", "/dev/evil"]
print(json.dumps({t: attempt(lambda t=t: open(t, "w").write("x")) for t in targets}))
print(json.dumps(attempt(lambda: open("/scratch/fine.txt", "w").write("x"))))
"""
    )
    result = run(sandbox, code)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    attempts = json.loads(lines[0])
    assert all(not value.startswith("OK") for value in attempts.values()), attempts
    assert attempts["/evil"] == attempts["/dev/evil"] == "OSError:30"  # EROFS
    # The code and the init are files of the root (not mounts of their own): read-only with it.
    assert (
        attempts["/sandbox/main.py"]
        == attempts["/sandbox/init.pyc"]
        == attempts["/sandbox/new"]
        == "OSError:30"
    )
    assert json.loads(lines[1]) == "OK:1"


def test_every_mount_but_scratch_is_read_only(sandbox, host: Host):
    """The mount table: read-only everywhere except /scratch, /proc (the kernel guards it) and devices."""
    result = run(sandbox, "print(open('/proc/self/mountinfo').read())")
    mounts = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) > 5:
            mounts[fields[4]] = set(fields[5].split(","))
    writable = sorted(point for point, options in mounts.items() if "rw" in options)
    devices = [f"/dev/{name}" for name in ("full", "null", "random", "urandom", "zero")]
    assert writable == sorted(["/proc", "/scratch", *devices])
    assert all("nosuid" in options for options in mounts.values())
    assert not any(point.startswith(("/etc", "/root", "/home", "/work", "/tmp")) for point in mounts)


def _serve_once(listener: socket.socket, accepted: list[socket.socket], stop: threading.Event) -> None:
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            continue
        accepted.append(client)


def test_loopback_services_and_dns_are_unreachable(sandbox, host: Host):
    """PostgreSQL (5432), Redis (6379), a server the test starts and DNS all fail from inside."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    stop = threading.Event()
    server = threading.Thread(target=_serve_once, args=(listener, accepted, stop))
    server.start()
    try:
        code = (
            PROBE
            + f"""
import socket
def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=2).close()
result = {{str(p): attempt(lambda p=p: connect(p)) for p in (5432, 6379, {port})}}
result["dns"] = attempt(lambda: socket.getaddrinfo("example.com", 443))
result["interfaces"] = [name for _, name in socket.if_nameindex()]
print(json.dumps(result))
"""
        )
        seen = outcome(run(sandbox, code))
    finally:
        stop.set()
        server.join()
        listener.close()
    for port_name in ("5432", "6379", str(port)):
        assert seen[port_name] == "ConnectionRefusedError:111", seen
    assert seen["dns"].startswith("gaierror"), seen
    assert seen["interfaces"] == ["lo"]
    assert accepted == []  # the test's server saw nothing


def test_fork_bomb_is_capped_and_ends(spinning_sandbox, host: Host):
    """Forking stops at the process limit; the bomb ends with the run and leaves nothing behind."""
    code = """
import os, time
made = 0
for _ in range(200):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
    except OSError:
        pass
print(made, flush=True)
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    result = run(spinning_sandbox, code)
    assert result.limit in ("wall_time", "cpu_time")
    made = int(result.stdout.split()[0])
    assert 0 < made < 16  # processes = 16, the code itself included


def test_memory_balloon_fails_inside(sandbox, host: Host):
    """Allocating past memory_bytes raises MemoryError inside; the result names the limit."""
    result = run(sandbox, "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))")
    assert result.exit_code == 1
    assert result.limit == "memory"
    assert "MemoryError" in result.stderr


def test_infinite_loop_hits_the_cpu_limit(sandbox_tools, host: Host):
    """A busy loop is killed by RLIMIT_CPU (1 s) well before the wall limit (however loaded the host)."""
    limits = {"cpu_seconds": 1, "wall_seconds": 120.0}
    tool = sandbox_tools({"default": {"limits": limits}}).get(SandboxTool)
    result = run(tool, "while True:\n    pass")
    assert result.limit == "cpu_time"
    assert result.exit_code == 128 + signal.SIGKILL
    assert result.cpu_seconds >= 0.5


def test_sleep_past_the_wall_limit_is_killed(sandbox_tools, host: Host):
    """A sleeping run is killed at wall_seconds; its exit code is None."""
    tool = sandbox_tools({"default": {"limits": {"wall_seconds": 1.0}}}).get(SandboxTool)
    result = run(tool, "import time\nprint('start', flush=True)\ntime.sleep(60)")
    assert (result.limit, result.exit_code) == ("wall_time", None)
    assert result.stdout == "start\n"
    assert 1.0 <= result.wall_seconds < 30


def test_100_mb_of_stdout_is_cut_and_killed(sandbox, host: Host):
    """Writing 100 MB kills the run at output_bytes; the kept output is exactly the cap."""
    result = run(sandbox, "import sys\nfor _ in range(1600):\n    sys.stdout.write('x' * 65536)")
    assert result.limit == "output"
    assert result.stdout_truncated and len(result.stdout) == 65536
    assert result.exit_code is None


def test_a_double_forked_daemon_and_a_zombie_do_not_outlive_the_call(sandbox, host: Host):
    """A daemon (double fork, new session, signals ignored) and a zombie die with the run."""
    code = """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        time.sleep(120)
        os._exit(0)
    os._exit(0)
if os.fork() == 0:
    os._exit(0)  # never waited for: a zombie
time.sleep(0.2)
print(len([p for p in os.listdir("/proc") if p.isdigit()]))
"""
    result = run(sandbox, code)
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout) >= 2  # the daemon was alive when the code ended
    assert len(host.uids) == 1  # the run's fresh user: the fixture finds no process of it left


def test_symlink_and_proc_root_tricks_stay_inside(sandbox_tools, host: Host):
    """Links and /proc/*/root lead to the sandbox's own root; an exported link is not followed."""
    tool = sandbox_tools({"default": {"exports": ["*"], "limits": {"wall_seconds": 5.0}}}).get(SandboxTool)
    code = (
        PROBE
        + f"""
os.symlink("/etc/shadow", "shadow")
os.symlink({str(host.sentinel)!r}, "sentinel")
os.symlink("/proc/self/root", "root")
seen = {{
    "shadow": attempt(lambda: open("shadow").read()),
    "sentinel": attempt(lambda: open("sentinel").read()),
    "proc_root": attempt(lambda: sorted(os.listdir("/proc/self/root"))),
    "proc_1_cwd": attempt(lambda: os.readlink("/proc/1/cwd")),
    "escape": attempt(lambda: open("/proc/self/root/../../etc/shadow").read()),
}}
open("real.txt", "w").write("kept")
print(json.dumps(seen))
"""
    )
    result = run(tool, code)
    seen = outcome(result)
    assert seen["shadow"].startswith("FileNotFoundError")
    assert seen["sentinel"].startswith("FileNotFoundError")
    assert seen["proc_root"] == "OK:" + repr(["dev", "lib", "lib64", "proc", "sandbox", "scratch", "usr"])
    assert seen["proc_1_cwd"] == "OK:'/scratch'"
    assert seen["escape"].startswith("FileNotFoundError")
    assert [(f.path, f.content) for f in result.files] == [("real.txt", b"kept")]  # links not exported


def test_ptrace_and_other_kernel_interfaces_are_refused(sandbox, host: Host):
    """ptrace, process_vm_readv, unshare, mount, keyctl, bpf and io_uring fail with EPERM."""
    code = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def call(number, *args):
    result = libc.syscall(number, *args)
    return result, ctypes.get_errno()
child = os.fork()
if child == 0:
    import time
    time.sleep(30)
    os._exit(0)
seen = {
    "ptrace_attach": call(101, 16, child, 0, 0),
    "ptrace_traceme": call(101, 0, 0, 0, 0),
    "process_vm_readv": call(310, child, 0, 0, 0, 0, 0),
    "unshare_user": call(272, 0x10000000),
    "mount": call(165, 0, 0, 0, 0, 0),
    "keyctl": call(250, 0, 0, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "io_uring_setup": call(425, 8, 0),
    "clone_newns": call(56, 0x00020000 | 17, 0, 0, 0, 0),
}
status = open("/proc/self/status").read()
seen["seccomp"] = status.split("Seccomp:")[1].split()[0]
seen["no_new_privs"] = status.split("NoNewPrivs:")[1].split()[0]
seen["capabilities"] = status.split("CapEff:")[1].split()[0]
print(json.dumps(seen))
"""
    result = run(sandbox, code)
    seen = outcome(result)
    for name in (
        "ptrace_attach",
        "ptrace_traceme",
        "process_vm_readv",
        "unshare_user",
        "mount",
        "keyctl",
        "bpf",
        "io_uring_setup",
        "clone_newns",
    ):
        assert seen[name] == [-1, 1], (name, seen[name])  # EPERM
    assert (seen["seccomp"], seen["no_new_privs"]) == ("2", "1")
    assert seen["capabilities"] == "0000000000000000"
    assert result.seccomp is True


def test_signalling_the_host_fails(sandbox, host: Host):
    """kill(-1) and kill(host pid) reach no host process; a host process the test started lives on."""
    victim = subprocess.Popen(["sleep", "30"])
    try:
        code = (
            PROBE
            + f"""
import signal
seen = {{"host": attempt(lambda: os.kill({victim.pid}, signal.SIGKILL)),
        "self_test": attempt(lambda: os.kill({os.getpid()}, signal.SIGKILL)),
        "everyone": attempt(lambda: os.kill(-1, signal.SIGKILL))}}
print(json.dumps(seen))
"""
        )
        seen = outcome(run(sandbox, code))
        assert seen["host"].startswith("ProcessLookupError") or victim.pid < 3
        assert seen["everyone"].startswith(("OK", "ProcessLookupError"))
        time.sleep(0.05)
        assert victim.poll() is None  # still running
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.close(0); os.close(1); os.close(2)\nwhile True: pass",
        "import os\nfor fd in range(3, 64):\n    try: os.write(fd, b'E' * 100)\n    except OSError: pass",
        "import os\nos.execv('/usr/bin/true', ['true'])",
    ],
    ids=["closes-its-output", "forges-the-export-stream", "execs-a-missing-program"],
)
def test_code_that_attacks_the_supervisor_gets_a_result(spinning_sandbox, host: Host, code: str):
    """Closing the pipes, writing junk to every descriptor, or exec'ing away still end in a result."""
    result = run(spinning_sandbox, code)
    assert result.files == ()  # nothing exported, and the forged stream yields no file
    assert result.stderr == "" or "Traceback" in result.stderr or "FileNotFoundError" in result.stderr


def test_no_descriptor_is_inherited_but_the_export_stream(sandbox_tools, host: Host):
    """The code holds stdin, stdout, stderr and the export descriptor; a program started by run
    holds only the first three. Nothing of the host (sockets, the audit database) is open."""
    tool = sandbox_tools({"default": {"limits": {"wall_seconds": 10.0}}}).get(SandboxTool)
    listing = """
import json, os
found = []
for fd in os.listdir("/proc/self/fd"):
    try:
        found.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass  # the directory listdir had open
print(json.dumps(sorted(found)))
"""
    python = json.loads(run(tool, listing).stdout)
    program = tool.run(["/usr/bin/python3", "-c", listing]).audit_as("List descriptors").execute()
    started = json.loads(program.stdout)
    assert len(python) == 4 and len(started) == 3
    for held in (python, started):
        assert sum(t.startswith("/memfd:toolbox-sandbox-stdin") for t in held) == 1
        assert all(t.startswith(("pipe:", "/memfd:toolbox-sandbox-stdin")) for t in held), held
    assert sum(t.startswith("pipe:") for t in python) == 3  # stdout, stderr and the export stream
