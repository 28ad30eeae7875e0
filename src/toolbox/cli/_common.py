"""What every ``toolbox`` sub-command shares: exit codes, output, errors, the policy.

The parser class that reports usage errors as one ``toolbox: error: ...`` line,
the plain-table and JSON printers (control characters escaped), the error line
of `fail`, and the trusted operator context the deployment's tools are loaded
under. Sub-command modules import it; it imports no ``cli*`` module.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from pydantic import ValidationError

from toolbox.doors._catalog import POLICY_ENV
from toolbox.doors._tools import Tools
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._line_text import one_line
from toolbox.registry._policy import ToolPolicy

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_UNUSABLE",
    "MAX_ERROR_TEXT",
    "PROG",
    "CliError",
    "Document",
    "Parser",
    "clean",
    "emit_json",
    "emit_lines",
    "fail",
    "load_tools",
    "operator_context",
    "policy_label",
    "table",
]

PROG = "toolbox"
EXIT_OK = 0
EXIT_UNUSABLE = 1
EXIT_ERROR = 2

CLI_TENANT = "cli"
FALLBACK_PRINCIPAL = "operator"
STANDARD = "standard"

MAX_ERROR_TEXT = 500
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]*@")

Document = dict[str, object]


# -- text helpers ---------------------------------------------------------------


def clean(text: object) -> str:
    """``text`` as one printable line: control characters (ANSI escapes, newlines), line separators
    and bidirectional controls are escaped (`toolbox.foundations._line_text.one_line`)."""
    return one_line(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "") -> list[str]:
    """Lines of a plain table: columns left-aligned, two spaces apart, no trailing blanks."""
    cells = [[clean(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


def emit_json(document: Document) -> None:
    """Print ``document`` as indented JSON."""
    print(json.dumps(document, indent=2, sort_keys=False))


def emit_lines(lines: Sequence[str]) -> None:
    """Print human-readable ``lines``."""
    print("\n".join(lines))


class CliError(Exception):
    """A problem the operator can fix, reported as one ``toolbox: error:`` line (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors of every sub-command reported as ``toolbox: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        # A URL typed after a wrong option is echoed by argparse: never its password.
        masked = _URL_PASSWORD.sub(r"\1***@", message)
        self.exit(EXIT_ERROR, f"{PROG}: error: {clean(masked)}\n")


def fail(message: str) -> int:
    """Report an error as one line on stderr and return the error exit status."""
    text = clean(message)
    if len(text) > MAX_ERROR_TEXT * 2:
        text = text[: MAX_ERROR_TEXT * 2 - 3] + "..."
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return EXIT_ERROR


# -- loading --------------------------------------------------------------------


def operator_context() -> ExecutionContext:
    """The trusted context for CLI use: tenant ``cli``, principal the OS user (or ``operator``)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no user name known to the OS or environment
        user = FALLBACK_PRINCIPAL
    try:
        return ExecutionContext(tenant=CLI_TENANT, principal=user)
    except ValidationError:  # e.g. an empty or unprintable user name
        return ExecutionContext(tenant=CLI_TENANT, principal=FALLBACK_PRINCIPAL)


def load_tools(policy_file: str | None) -> Tools:
    """Discover installed providers and decide under ``policy_file`` (or the env/standard fallback).

    Raises:
        PolicyFileError: the policy file is missing or malformed.
        ProviderConflictError: two providers claim one tool.
    """
    policy = ToolPolicy.from_file(policy_file) if policy_file is not None else None
    return Tools.load(operator_context(), policy=policy)


def policy_label(tools: Tools, *, from_flag: bool) -> str:
    """Where the policy came from: its file (``--policy`` or ``TOOLBOX_POLICY``), or ``standard``."""
    source = tools.policy.source
    if source is None:
        return STANDARD
    return source if from_flag else f"{source} (from {POLICY_ENV})"
