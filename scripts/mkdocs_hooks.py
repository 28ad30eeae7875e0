"""MkDocs hooks: the site shows the repository's root Markdown files.

SECURITY.md, CHANGELOG.md and CONTRIBUTING.md live at the root (where GitHub
and packagers look for them); docs/ holds a one-line stub page for each. Here
the stub's text is replaced by the root file, and links are rewritten so they
work in the site as they do on GitHub: ``docs/x.md`` (from a root file) becomes
``x.md`` and ``../SECURITY.md`` (from a docs page) becomes ``security.md``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT_PAGES = {
    "SECURITY.md": "security.md",
    "CHANGELOG.md": "changelog.md",
    "CONTRIBUTING.md": "contributing.md",
}
_STUBS = {page: root for root, page in ROOT_PAGES.items()}
_DOCS_LINK = re.compile(r"\]\(docs/")
_ROOT_LINK = re.compile(r"\]\((?:\.\./)?(" + "|".join(re.escape(name) for name in ROOT_PAGES) + r")")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Swap a stub for its root file; point links at the site's pages."""
    root_file = _STUBS.get(page.file.src_uri)
    if root_file is not None:
        markdown = (Path(config.config_file_path).parent / root_file).read_text(encoding="utf-8")
        markdown = _DOCS_LINK.sub("](", markdown)
    return _ROOT_LINK.sub(lambda link: f"]({ROOT_PAGES[link.group(1)]}", markdown)
