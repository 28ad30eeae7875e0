"""The ``toolbox`` command: what an operator checks at deploy time.

Usage::

    toolbox --version
    toolbox list  [--policy FILE] [--json]
    toolbox check [--policy FILE] [--require NAME ...] [--json]
    toolbox audit show TRACE_ID  STORE [--json]
    toolbox audit tail [-n N]    STORE [--json]
    toolbox audit verify [TRACE_ID] STORE [--json]
    toolbox audit replay FALLBACK_FILE STORE [--json]
    toolbox kill engage|release|status [--tool NAME] [--reason TEXT] [--policy FILE]   (cli_kill)
    toolbox mcp serve [--policy FILE] [--transport stdio|http] ...   (toolbox.cli._mcp)

    STORE: exactly one of --sqlite PATH, --jsonl PATH,
           --postgres-url-env VAR [--schema NAME], --policy FILE

``list`` shows every discovered tool, each operation with its effect, the
providers that failed to load and the distributions the policy blocked.
``check`` shows, for every tool, whether this deployment may use it and why,
and its acknowledgement state, and which Cedar policies the policy file loads.

``audit`` reads an audit store as an auditor: every tenant's events, with no
tenant scoping (the operator running the command is trusted with the store
itself). ``show`` prints one trace's events in sequence order, then the tree
of the runs it delegated to (and the run that delegated it); ``tail`` the
latest events across traces; ``verify`` checks the hash chains of one trace
or of every trace and names each edited, removed or reordered event (exit 1);
``replay`` stores a fallback file's events once each (``cli_audit_replay``).
A PostgreSQL URL is only ever read from the environment variable named by
``--postgres-url-env``, never from the command line; ``--policy`` reads the
first ``[[audit.sinks]]`` of the file's ``[audit]`` table. Events are redacted
when written; the command prints them as stored, control characters escaped.

The policy is ``--policy FILE``, else the file named by ``TOOLBOX_POLICY``,
else `ToolPolicy.standard`. ``--json`` (before or after the command) prints
one JSON document instead of aligned columns.

Exit status: 0 on success; 1 when a ``--require``-d tool is unusable, when
``audit verify`` finds a problem or when a trace has no events; 2 on an
error (malformed policy file, provider conflict, bad arguments), reported as
one ``toolbox: error: ...`` line on stderr, never a traceback; 141, quietly, when
the output's reader went away (``toolbox list | head``), as for ``cat``.

Nothing from the environment is printed except acknowledgement variable names
and the values they must hold, which are approvals, not secrets.

This module assembles the parser and runs it; each sub-command lives in its
own module (``list`` / ``check``: `toolbox.cli._inspect`, ``audit``:
`toolbox.cli._audit`, ...) and what they share in `toolbox.cli._common`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from toolbox.cli._audit import add_audit
from toolbox.cli._auth import add_auth
from toolbox.cli._common import EXIT_ERROR, PROG, CliError, Parser, fail
from toolbox.cli._inspect import add_check, add_list
from toolbox.cli._kill import add_kill
from toolbox.cli._mcp import add_mcp
from toolbox.doors._catalog import POLICY_ENV
from toolbox.errors import ToolboxError

__all__ = ["main"]

#: The status of a command whose output's reader went away (a shell's 128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolbox-registry")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


class _Version(argparse._VersionAction):
    """``--version``, the installed version read only when asked for (a metadata look-up, ~6 ms cold).

    argparse's own action, printing as it does (stdout, the help formatter's wrapping).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        self.version = f"%(prog)s {_version()}"
        super().__call__(parser, namespace, values, option_string)


def _parser() -> argparse.ArgumentParser:
    """The argument parser: ``list``, ``check`` and ``audit``, ``--json`` accepted before or after them."""
    parser = Parser(
        prog=PROG,
        description="Inspect the tools this deployment can hand to LLM agents, and its audit trail.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--version", action=_Version)
    # Sub-commands accept --json too; SUPPRESS keeps `toolbox --json list` from being reset.
    common_json = Parser(add_help=False)
    common_json.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document"
    )
    common = Parser(add_help=False, parents=[common_json])
    common.add_argument(
        "--policy",
        metavar="FILE",
        help=f"TOML policy file (default: ${POLICY_ENV}, else the standard policy)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_list(commands, common)
    add_check(commands, common)
    add_audit(commands, common_json)
    add_auth(commands, common_json)
    add_kill(commands, common)
    add_mcp(commands)
    from toolbox.cli._serve import add_serve

    add_serve(commands, common)
    return parser


def _reader_gone() -> int:
    """The output's reader closed it (``toolbox list | head``): stop quietly, as ``cat`` does.

    Standard output is pointed at ``/dev/null`` so the interpreter's last flush cannot fail
    again; the status is the shell's for a process ended by SIGPIPE (128 + 13).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor behind sys.stdout (a test's capture)
        pass
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolbox`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has already printed help or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # a reader that left early is found here, not at interpreter exit
    except BrokenPipeError:
        return _reader_gone()
    except (ToolboxError, CliError) as exc:  # malformed policy, provider conflict, bad store, ...
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{type(exc).__name__}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - an operator tool reports, it never dumps a traceback
        return fail(f"unexpected {type(exc).__name__}: {exc}")
    return status
