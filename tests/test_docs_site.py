"""The documentation site builds strictly, offline, and documents the public API.

``mkdocs build --strict`` runs here, so the README's test command fails on a
broken reference, a griffe docstring warning or a dead link.
"""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# Builds (wheels, the docs site) run in the full tier, before a release (CONTRIBUTING.md).
pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_MODULES = (
    "toolbox",
    "toolbox.audit",
    "toolbox.doors",
    "toolbox.testing",
    "toolbox.integrations.pydantic_ai",
    "toolbox.integrations.openai_agents",
    "toolbox.integrations.langchain",
    "toolbox_http",
    "toolbox_fs",
    "toolbox_sql",
)


def mkdocs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's end-of-life banner, not a build problem
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    built = mkdocs("--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out))
    assert built.returncode == 0, built.stderr
    return out


def anchors(site_dir: Path) -> set[str]:
    found: set[str] = set()
    for page in (site_dir / "reference").rglob("*.html"):
        found |= set(re.findall(r'id="([\w.]+)"', page.read_text(encoding="utf-8")))
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_reference_entry(site, module_name):
    """A name in ``__all__`` with no entry: add it to a docs/reference page (or give it a docstring)."""
    rendered = anchors(site)
    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        # Classes and functions may be rendered where they are defined (``::: toolbox.errors``).
        defined_in = getattr(value, "__module__", None) if callable(value) else None
        if f"{module_name}.{name}" not in rendered and f"{defined_in}.{name}" not in rendered:
            missing.append(name)
    assert not missing, f"{module_name}: not in the API reference: {missing}"


def test_root_files_are_pages_and_links_to_them_work(site):
    """SECURITY, CHANGELOG and CONTRIBUTING are shown from the root files; links to them resolve."""

    def page(name: str) -> str:
        return (site / name / "index.html").read_text(encoding="utf-8")

    assert "Threat model" in page("security")
    assert "Keep a Changelog" in page("changelog")
    assert "scripts/test" in page("contributing")
    assert 'href="../governance/#adding-an-interceptor"' in page("contributing")  # docs/... link rewritten
    deployment = (site / "deployment" / "index.html").read_text(encoding="utf-8")
    assert 'href="../security/' in deployment
    assert "SECURITY.md" not in re.findall(r'href="([^"]+)"', deployment)


def test_site_loads_nothing_from_other_hosts(site):
    """No web fonts, scripts or styles from a CDN: the site works offline."""
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?://[^"]+)"', html)
        assert not remote, f"{page.relative_to(site)} loads {remote}"


def test_strict_config_fails_on_broken_reference_docstring_and_link(tmp_path):
    """The project's own config (no --strict flag) refuses each kind of docs breakage."""
    package = tmp_path / "src" / "badly_documented"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "def f(a: int) -> int:\n"
        '    """Do it.\n\n    Args:\n        b: no such parameter.\n    """\n'
        "    return a\n"
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n\n::: badly_documented\n")
    (docs / "last.md").write_text("# Last\n\n::: toolbox.NoSuchName\n")

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config.update(docs_dir=str(docs), nav=["index.md", "last.md"], hooks=[], watch=[])
    handler = config["plugins"][-1]["mkdocstrings"]["handlers"]["python"]
    handler["paths"] = [str(tmp_path / "src"), *(str(ROOT / p) for p in handler["paths"])]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))

    built = mkdocs("--config-file", str(tmp_path / "mkdocs.yml"), "--site-dir", str(tmp_path / "site"))
    assert built.returncode != 0
    assert "contains a link 'missing.md'" in built.stderr
    assert "Parameter 'b' does not appear in the function signature" in built.stderr
    assert "Could not collect 'toolbox.NoSuchName'" in built.stderr
