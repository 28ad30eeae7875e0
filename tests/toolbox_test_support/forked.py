"""Run the collected tests in worker processes forked from the one that collected them.

``pytest --forked-workers N`` (what ``scripts/test`` runs): the pytest process imports and
collects once, then forks N workers from that state. Why not pytest-xdist's workers: each is a
new interpreter that imports every test module, the agent frameworks and toolbox and collects
the ~5,900 items again (~9 s of CPU per worker on the 2-core machine, three times over, before
the first test runs). A forked worker starts in milliseconds and shares the collected heap
copy-on-write (frozen out of the garbage collector's way first), so a worker more, to overlap
the tests' waits on child processes, servers and timeouts, costs almost nothing.

How a run goes:

- the parent keeps every worker's queue: each starts with a contiguous share of the items (one
  module's tests stay together, so its fixtures are set up once per share); a worker asks for
  its items one at a time, and a worker whose queue is empty takes the second half of the
  longest queue left (pytest-xdist's ``worksteal``);
- a worker runs pytest's own ``pytest_runtest_protocol`` with the next item of its own queue as
  ``nextitem``, so fixtures are set up and torn down as in one process, and sends each report
  to the parent through pytest's report serialization hooks; the parent logs it: progress,
  failures, warnings, ``--durations`` and the exit status are the parent's, as in one process;
- a worker that dies mid-test fails that test, saying how it died; what it was still to run goes
  to a worker forked anew (the others may have been told there is nothing left);
- ``-x`` / ``--maxfail``: once the parent counts enough failures it hands out nothing more;
- each worker gets its own ``tmp_path`` root (``<basetemp>/fwN``) and sees
  ``TOOLBOX_TEST_WORKER=fwN``;
- ``--start-after PATH`` makes the run wait, collected, until PATH exists and holds ``0``
  (``scripts/test`` installs what only the tests need meanwhile); any other content ends the run;
- once every worker is done the parent freezes its heap (``gc.freeze()``), so the interpreter's
  exit frees it without collecting it first (~1.3 s of one core at the end of every run).
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_HEADER = struct.Struct("!I")
#: How often ``--start-after`` looks for its file, and how long at most (then the run ends).
_START_POLL = 0.1
_START_LIMIT = 1800.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("forked", "forked workers (tests/toolbox_test_support/forked.py)")
    group.addoption(
        "--forked-workers",
        type=int,
        default=0,
        metavar="N",
        help="run the tests in N workers forked after collection (0: in this process)",
    )
    group.addoption(
        "--start-after",
        default=None,
        metavar="PATH",
        help="after collecting, wait until PATH exists and holds 0 (anything else ends the run)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    config = session.config
    if config.option.collectonly or (session.testsfailed and not config.option.continue_on_collection_errors):
        return None  # pytest's own loop reports it
    start_after = config.getoption("start_after")
    if start_after:
        _wait_for_start(Path(start_after))
    workers = config.getoption("forked_workers")
    if workers <= 0 or len(session.items) < 2:
        return None
    _Parent(session, min(workers, len(session.items))).run()
    return True


def _wait_for_start(path: Path) -> None:
    give_up = time.monotonic() + _START_LIMIT
    # Not there yet, or created and not yet written: wait (bounded, so a lost writer ends the run).
    while not (status := path.read_text().strip() if path.exists() else ""):
        if time.monotonic() > give_up:
            pytest.exit(f"not running the tests: nothing in {path} after {_START_LIMIT:.0f} s", returncode=3)
        time.sleep(_START_POLL)
    if status != "0":
        pytest.exit(f"not running the tests: {path} holds {status!r}, not 0", returncode=3)


# --- the wire: length-prefixed pickles over a socketpair --------------------------------------


def _send(sock: socket.socket, message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        try:
            chunk = sock.recv(left)
        except ConnectionResetError:  # the other end died with our message unread
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> tuple[Any, ...] | None:
    header = _receive_exactly(sock, _HEADER.size)
    if header is None:
        return None
    body = _receive_exactly(sock, _HEADER.unpack(header)[0])
    return None if body is None else pickle.loads(body)


# --- the parent --------------------------------------------------------------------------------


@dataclass
class _Worker:
    name: str
    pid: int
    sock: socket.socket
    queue: deque[int]
    #: Items handed out and not finished, oldest first (the running one, then the next).
    handed: deque[int] = field(default_factory=deque)
    started: set[int] = field(default_factory=set)
    #: Its wait status, once reaped.
    status: int | None = None


class _Parent:
    def __init__(self, session: pytest.Session, count: int) -> None:
        self.session = session
        self.config = session.config
        self.items = session.items
        self.count = count
        self.workers: list[_Worker] = []
        self.by_nodeid = {item.nodeid: index for index, item in enumerate(self.items)}
        self.basetemp: Path = self.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        self.selector = selectors.DefaultSelector()

    def run(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            # Reports of several modules interleave: a progress line, not a line per module switch
            # (as pytest-xdist does).
            reporter.showfspath = False
        share = len(self.items) / self.count
        for number in range(self.count):
            self._start(deque(range(round(number * share), round((number + 1) * share))))
        try:
            while any(worker.status is None for worker in self.workers):
                for key, _ in self.selector.select():
                    self._read(key.data)
        except BaseException:
            for worker in self.workers:
                if worker.status is None:
                    os.kill(worker.pid, signal.SIGTERM)
            for worker in self.workers:
                if worker.status is None:
                    os.waitpid(worker.pid, 0)
            raise
        finally:
            self.selector.close()
        # This process only reports and exits now, and the interpreter's exit collects the whole
        # heap (the collection, every report) before freeing it: ~1.3 s of one core at the very
        # end of the run, for memory the kernel takes back anyway. Frozen, the collector skips it
        # (what the summary allocates from here on is collected as usual).
        gc.freeze()

    def _start(self, queue: deque[int]) -> None:
        """Fork a worker (named after how many came before it) that starts on ``queue``."""
        name = f"fw{len(self.workers)}"
        parent_end, child_end = socket.socketpair()
        sys.stdout.flush()
        sys.stderr.flush()
        # The collected heap stays out of the worker's collections (and its pages shared).
        gc.collect()
        gc.freeze()
        try:
            pid = os.fork()
        finally:
            gc.unfreeze()
        if pid == 0:  # the worker
            parent_end.close()
            self.selector.close()
            for other in self.workers:
                other.sock.close()
            code = 1
            try:
                _WorkerProcess(self.session, name, child_end, self.basetemp / name).run()
                code = 0
            except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent says so
                code = 130
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        child_end.close()
        worker = _Worker(name, pid, parent_end, queue)
        self.workers.append(worker)
        self.selector.register(parent_end, selectors.EVENT_READ, worker)

    def _read(self, worker: _Worker) -> None:
        # One message: a worker writes each whole (sendall), so the rest follows at once.
        message = _receive(worker.sock)
        if message is not None:
            self._handle(worker, message)
            return
        self.selector.unregister(worker.sock)
        worker.sock.close()
        self._reap(worker)

    def _handle(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind, *args = message
        hook = self.config.hook
        if kind == "next":
            index = self._next_for(worker)
            if index is not None:
                worker.handed.append(index)
            _send(worker.sock, ("item", index))
        elif kind == "logstart":
            nodeid, location = args
            worker.started.add(self.by_nodeid[nodeid])
            hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        elif kind == "report":
            report = hook.pytest_report_from_serializable(config=self.config, data=args[0])
            hook.pytest_runtest_logreport(report=report)
        elif kind == "logfinish":
            nodeid, location = args
            index = self.by_nodeid[nodeid]
            worker.handed.remove(index)
            worker.started.discard(index)
            hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        elif kind == "warning":
            data, when, nodeid, location = args
            hook.pytest_warning_recorded.call_historic(
                kwargs={
                    "warning_message": _warning_from(data),
                    "when": when,
                    "nodeid": nodeid,
                    "location": location,
                }
            )

    def _next_for(self, worker: _Worker) -> int | None:
        if self.session.shouldfail or self.session.shouldstop:
            return None
        if not worker.queue:
            victim = max(self.workers, key=lambda other: len(other.queue))
            # The second half of the longest queue: its owner keeps the items nearest its turn.
            take = (len(victim.queue) + 1) // 2
            for _ in range(take):
                worker.queue.appendleft(victim.queue.pop())
        return worker.queue.popleft() if worker.queue else None

    def _reap(self, worker: _Worker) -> None:
        _, wait_status = os.waitpid(worker.pid, 0)
        worker.status = wait_status
        if not worker.handed and not worker.queue:
            return
        # It died with items: the one it had started fails; the others go to a new worker (the
        # others may have been told there is nothing left, and this process is still as collected).
        how = (
            f"killed by signal {os.WTERMSIG(wait_status)}"
            if os.WIFSIGNALED(wait_status)
            else f"exited with status {os.WEXITSTATUS(wait_status)}"
        )
        for index in worker.handed:
            if index in worker.started:
                self._fail_crashed(self.items[index], f"worker {worker.name} {how} while running this test")
        left = deque(index for index in worker.handed if index not in worker.started)
        left.extend(worker.queue)
        worker.handed.clear()
        worker.queue.clear()
        if left:
            self._start(left)

    def _fail_crashed(self, item: pytest.Item, message: str) -> None:
        hook = self.config.hook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        report = pytest.TestReport(item.nodeid, item.location, {}, "failed", message, "call")
        hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _warning_from(data: dict[str, Any]) -> warnings.WarningMessage:
    category: type[Warning] = UserWarning
    try:
        found = getattr(importlib.import_module(data["category_module"]), data["category_name"])
        if isinstance(found, type) and issubclass(found, Warning):
            category = found
    except (ImportError, AttributeError, TypeError):
        pass
    return warnings.WarningMessage(
        category(data["message"]), category, data["filename"], data["lineno"], None, None
    )


# --- a worker ------------------------------------------------------------------------------------


class _WorkerProcess:
    """The forked side: asks for items, runs them, forwards what pytest reports."""

    def __init__(self, session: pytest.Session, name: str, sock: socket.socket, basetemp: Path) -> None:
        self.session = session
        self.config = session.config
        self.name = name
        self.sock = sock
        self.basetemp = basetemp
        self.registered = False

    def run(self) -> None:
        config = self.config
        os.environ["TOOLBOX_TEST_WORKER"] = self.name
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        factory = config._tmp_path_factory  # type: ignore[attr-defined]
        factory._given_basetemp = self.basetemp
        factory._basetemp = None
        # The parent's terminal shows the run; here pytest only runs the items.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)
        # Registering replays the parent's earlier warnings (a historic hook): not this worker's.
        config.pluginmanager.register(self, f"forked-worker-{self.name}")
        self.registered = True
        items = self.session.items
        current = self._ask()
        while current is not None:
            following = self._ask()
            config.hook.pytest_runtest_protocol(
                item=items[current], nextitem=None if following is None else items[following]
            )
            current = following
        config.hook.pytest_sessionfinish(session=self.session, exitstatus=0)
        self.sock.close()

    def _ask(self) -> int | None:
        _send(self.sock, ("next",))
        answer = _receive(self.sock)
        if answer is None:
            return None
        index: int | None = answer[1]
        return index

    # Hooks: what the parent's terminal, session and plugins need to hear.

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        _send(self.sock, ("logstart", nodeid, location))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        _send(self.sock, ("report", data))

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        _send(self.sock, ("logfinish", nodeid, location))

    def pytest_warning_recorded(
        self,
        warning_message: warnings.WarningMessage,
        when: str,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        if not self.registered:
            return
        data = {
            "message": str(warning_message.message),
            "category_module": warning_message.category.__module__,
            "category_name": warning_message.category.__name__,
            "filename": warning_message.filename,
            "lineno": warning_message.lineno,
        }
        _send(self.sock, ("warning", data, when, nodeid, location))
