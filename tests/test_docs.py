"""Every code example in README.md and docs/ runs.

Python blocks of one file run in order in one namespace, in a temporary
working directory, against a loopback server that stands in for
``http://127.0.0.1:8000``. TOML blocks whose first line is ``# policy.toml``
must be valid policy files. A block preceded by ``<!-- not-run: reason -->``
is skipped, and the reason must be given. A page split out of a longer one says
``<!-- continues: other.md -->``: its examples run after every example of
``other.md`` (and of the page that one continues), in the same namespace.
A Python script an example starts with ``sys.executable`` (an MCP server) is
forked by a zygote that imported the MCP SDK once (`zygote.python_executable`).
"""

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import zygote
from toolbox import ToolPolicy

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    ROOT / "SECURITY.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "integrations").glob("*.md")),
    ROOT / "providers" / "toolbox-http" / "README.md",
    ROOT / "providers" / "toolbox-fs" / "README.md",
    ROOT / "providers" / "toolbox-sandbox" / "README.md",
    ROOT / "providers" / "toolbox-sql" / "README.md",
]
BLOCK = re.compile(r"(<!-- not-run: [^>]+-->\s*)?```(\w+)[^\n]*\n(.*?)```", re.S)
CONTINUES = re.compile(r"<!-- continues: ([\w\-./]+\.md) -->")
PLACEHOLDER = "http://127.0.0.1:8000"


class Api(BaseHTTPRequestHandler):
    def do_GET(self):
        self._reply({"base": "USD", "rates": {"EUR": 0.92}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self._reply({"accepted": True})

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _reply(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def blocks(path: Path, language: str) -> list[str]:
    found = []
    for skipped, lang, code in BLOCK.findall(path.read_text(encoding="utf-8")):
        if lang == language and not skipped:
            found.append(code)
    return found


def python_program(path: Path) -> list[tuple[str, str]]:
    """The page's Python blocks, after those of the page it continues: ``(label, code)`` in run order."""
    found = CONTINUES.findall(path.read_text(encoding="utf-8"))
    assert len(found) <= 1, f"{path.name}: a page continues at most one other"
    earlier = python_program((path.parent / found[0]).resolve()) if found else []
    own = [(f"{path.name}[block {index}]", code) for index, code in enumerate(blocks(path, "python"))]
    return earlier + own


def test_docs_exist():
    """The documentation set named by the project is present."""
    names = {p.name for p in DOCS}
    for required in (
        "README.md",
        "SECURITY.md",
        "architecture.md",
        "concepts.md",
        "providers.md",
        "deployment.md",
        "policy-file.md",
        "testing.md",
        "http.md",
    ):
        assert required in names


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_examples_run(path, server_url, tmp_path, monkeypatch):
    """Each file's Python examples run top to bottom without error."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    program = python_program(path)
    if any("sys.executable" in code for _, code in program):  # a page starting an MCP server script
        python = zygote.python_executable(tmp_path, *zygote.MCP_SERVER_PRELOAD)
        monkeypatch.setattr(sys, "executable", str(python))
    for label, code in program:
        source = code.replace(PLACEHOLDER, server_url)
        exec(compile(source, label, "exec"), namespace)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_policy_examples_are_valid(path, tmp_path):
    """TOML examples marked '# policy.toml' are valid policy files."""
    for index, code in enumerate(blocks(path, "toml")):
        if code.startswith("# policy.toml"):
            file = tmp_path / f"{index}.toml"
            file.write_text(code, encoding="utf-8")
            ToolPolicy.from_file(file)


def test_every_page_with_examples_is_covered():
    """A Markdown file users read that holds a Python example is in DOCS, so the example runs."""
    readers = [
        ROOT / "README.md",
        ROOT / "SECURITY.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "providers").glob("*/README.md"),
    ]
    uncovered = [p for p in readers if "```python" in p.read_text(encoding="utf-8") and p not in DOCS]
    assert not uncovered, f"add to DOCS: {[str(p.relative_to(ROOT)) for p in uncovered]}"


def test_a_continued_page_exists_and_is_covered():
    """``<!-- continues: x.md -->`` names a page of DOCS in the same folder, and no page continues itself."""
    for path in DOCS:
        for name in CONTINUES.findall(path.read_text(encoding="utf-8")):
            earlier = (path.parent / name).resolve()
            assert earlier in DOCS and earlier != path, f"{path.name} continues {name}"


# Reference pages may be long.
LONG_PAGES_ALLOWED = {"policy-file.md"}


def test_pages_stay_short_enough_to_finish():
    """The README fits 150 lines; a narrative page holds about 600 at most (split it by task)."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150
    for page in (ROOT / "docs").rglob("*.md"):
        if page.name not in LONG_PAGES_ALLOWED:
            lines = len(page.read_text(encoding="utf-8").splitlines())
            assert lines <= 620, f"{page.relative_to(ROOT)}: {lines} lines"


def test_skips_give_reasons():
    """A skipped example always says why."""
    for path in DOCS:
        for match in re.finditer(r"<!-- not-run:(.*?)-->", path.read_text(encoding="utf-8")):
            assert match.group(1).strip(), f"{path.name}: not-run without a reason"


def _extras() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def test_every_extra_the_docs_install_exists():
    """``toolbox-registry[x]`` and ``<wheel>.whl[x]``: each x is an extra of pyproject.toml."""
    extras = _extras()
    named = re.compile(r"(?:toolbox-registry|toolbox_registry-[^\s\"'\[]*\.whl)\[([a-z0-9,\- ]+)\]")
    for page in DOCS:
        for found in named.finditer(page.read_text(encoding="utf-8")):
            for extra in found.group(1).split(","):
                assert extra.strip() in extras, f"{page.name}: no extra {extra.strip()!r}"


def test_the_readme_says_how_extras_are_installed():
    """From a wheel file (``...whl[mcp]``), and which extra fleet state on Redis needs (not ``[state]``,
    the policy file's table, which is no extra)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r'pip install "dist/toolbox_registry-[^"]+\.whl\[[a-z,\-]+\]"', readme)
    assert 'toolbox-registry[redis]"' in readme
    assert "state" not in _extras()
    listed = re.search(r"The extras: (.+?)\n\n", readme, re.DOTALL)
    assert listed is not None
    assert set(re.findall(r"`([a-z0-9\-]+)`", listed.group(1))) == _extras() - {"sql"}
