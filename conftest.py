"""Settings shared by every test directory: the Hypothesis profiles.

Property tests run with a bounded example count and keep their example database in a
fixed folder outside the tree (``TOOLBOX_HYPOTHESIS_DB``, default
``~/.cache/toolbox/hypothesis``), so a failing example found once is tried first next time
without leaving files in the checkout. ``CI=true`` selects the ``ci`` profile.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

_DATABASE = Path(os.environ.get("TOOLBOX_HYPOTHESIS_DB", Path.home() / ".cache" / "toolbox" / "hypothesis"))

settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    database=DirectoryBasedExampleDatabase(_DATABASE),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", settings.get_profile("dev"), max_examples=200, print_blob=True)
settings.load_profile(os.environ.get("TOOLBOX_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
