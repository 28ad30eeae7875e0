"""Where audit events go, one module per sink: memory, JSON lines, SQLite, PostgreSQL, OpenTelemetry.

`toolbox.audit` re-exports the sinks; PostgreSQL and OpenTelemetry load their
optional dependencies only when used.
"""
