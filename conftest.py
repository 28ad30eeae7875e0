"""Settings shared by every test directory: the test tiers and the Hypothesis profiles.

Tiers: the default tier is what CI runs on every change; ``pytest --full`` (``scripts/test
--full``) also runs the tests marked ``full``: load tests at full size, every multi-process
race, wheel and documentation-site builds. Both must pass before a release.

Property tests run with a bounded example count and keep their example database inside the
checkout (``.hypothesis/``, ignored by git; ``TOOLBOX_HYPOTHESIS_DB`` moves it), so a failing
example found once is tried first next time, without sharing it across checkouts.
``CI=true`` selects the ``ci`` profile (100 examples, the failing blob printed), ``--full`` the
``full`` profile (500 examples).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

# `--forked-workers N` (scripts/test): collect once, then run in N forked workers.
pytest_plugins = ["toolbox_test_support.forked"]

_DATABASE = Path(os.environ.get("TOOLBOX_HYPOTHESIS_DB", Path(__file__).parent / ".hypothesis" / "examples"))

settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    database=DirectoryBasedExampleDatabase(_DATABASE),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", settings.get_profile("dev"), print_blob=True)
# The full tier (--full, before a release) tries five times as many examples.
settings.register_profile("full", settings.get_profile("ci"), max_examples=500)


if os.environ.get("TOOLBOX_TEST_FRESH_CACHES"):
    # scripts/mutation: mutmut forks each mutant's run from a process that already ran the tests,
    # and the schemas and entry point listing that process kept would answer for the mutated code.

    @pytest.fixture(autouse=True)
    def _fresh_caches() -> None:
        from toolbox.pipeline.checks import _schemas
        from toolbox.registry import _entry_points

        _schemas._derived.clear()
        _entry_points.clear()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        default=False,
        help="also run the tests marked `full` (load at full size, every race, builds)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # tests/tiers.py reads the tier from the environment, so helper modules and xdist workers agree.
    full = config.getoption("--full")
    os.environ["TOOLBOX_TEST_TIER"] = "full" if full else "default"
    profile = "full" if full else "ci" if os.environ.get("CI") else "dev"
    settings.load_profile(os.environ.get("TOOLBOX_HYPOTHESIS_PROFILE", profile))
    config.addinivalue_line(
        "markers", "full: runs only in the full tier (pytest --full), required before a release"
    )
    xdist_controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if xdist_controller or config.getoption("forked_workers") > 0:
        # Before the workers start (forked or xdist's): one zygote of each kind for all of them.
        import state_worker  # tests/ (the pythonpath setting)
        import zygote

        zygote.serve_workers(zygote.TOOLBOX_PRELOAD, zygote.MCP_SERVER_PRELOAD, state_worker.PRELOAD)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (never skip) the full tier's tests unless --full was given."""
    if config.getoption("--full"):
        return
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        (deselected if item.get_closest_marker("full") else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the zygotes (tests/zygote.py) this process started, reaping their children's CPU."""
    zygote = sys.modules.get("zygote")
    if zygote is not None:
        zygote.stop_all()
