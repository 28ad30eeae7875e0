"""toolbox.audit's SQL sinks: typed for mypy, still imported only when used."""

import subprocess
import sys

import toolbox.audit


def test_sql_sinks_are_exported_and_resolve():
    """SqliteSink and PostgresSink are in __all__ and resolve to their classes."""
    from toolbox.audit import PostgresSink, SqliteSink

    assert {"SqliteSink", "PostgresSink"} <= set(toolbox.audit.__all__)
    assert (toolbox.audit.SqliteSink, toolbox.audit.PostgresSink) == (SqliteSink, PostgresSink)


def test_importing_the_package_does_not_import_the_sql_sinks():
    """The TYPE_CHECKING imports cost nothing at run time."""
    code = (
        "import sys, toolbox.audit\n"
        "assert 'toolbox.audit.sinks._postgres' not in sys.modules\n"
        "assert 'toolbox.audit.sinks._sqlite' not in sys.modules\n"
        "toolbox.audit.SqliteSink\n"
        "assert 'toolbox.audit.sinks._sqlite' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
