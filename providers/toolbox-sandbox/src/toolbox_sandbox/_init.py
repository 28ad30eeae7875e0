"""The sandbox's init as the profile's interpreter runs it: ``_inside.py``'s source, bare, compiled once.

The init (``_inside.py``) is never imported on the host. Its source is stripped
of docstrings, annotations and the ``__future__`` import (less to load, nothing
an older interpreter refuses), then compiled *by the profile's interpreter*
once per interpreter file version (`interpreter` asks it, with the facts of
its standard library) into the bytes of a ``.pyc`` file. Each run mounts those
bytes read-only at ``/sandbox/init.pyc`` and starts ``python -I -S -B
/sandbox/init.pyc``: the interpreter loads the code object instead of compiling
the init's source on every run, as ``python -c <source>`` did.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["COMPILE_INIT", "INIT_PATH", "INSIDE_SOURCE"]

#: Where each run finds the compiled init (a read-only file of its own).
INIT_PATH = "/sandbox/init.pyc"


class _Bare(ast.NodeTransformer):
    """Strips docstrings, annotations and the ``__future__`` import: less for every run to load,
    and nothing a Python older than the host's could refuse."""

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            body = body[1:]
        return body or [ast.Pass()]

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = [
            n
            for n in self._body(node.body)
            if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
        ]
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.body, node.returns = self._body(node.body), None
        for argument in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            argument.annotation = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:  # pragma: no cover - the init declares no bare annotations
            return ast.Pass()
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _init_source() -> str:
    tree = ast.parse(Path(__file__).with_name("_inside.py").read_text(encoding="utf-8"))
    return ast.unparse(ast.fix_missing_locations(_Bare().visit(tree)))


#: The init's source (``_inside.py`` without docstrings and annotations).
INSIDE_SOURCE = _init_source()

#: What the profile's interpreter runs (``-I -S -c``, the source on stdin) to compile the init: a
#: ``.pyc`` file's bytes (its magic number, an unchecked 12-byte header, the marshalled code) in
#: hexadecimal, for a JSON answer. The code's file name is ``<string>``, as under ``-c``.
COMPILE_INIT = (
    "import importlib.util, marshal\n"
    "init = importlib.util.MAGIC_NUMBER + bytes(12) + "
    "marshal.dumps(compile(sys.stdin.read(), '<string>', 'exec'))\n"
)
