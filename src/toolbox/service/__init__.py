"""The governance service: a REST API and an operator console over a governed `Gateway`.

``pip install "toolbox-registry[service]"``, then ``toolbox serve --policy FILE``;
see docs/service.md. `create_app` builds the FastAPI app from code,
`app_from_policy_file` from a policy file, `app_from_environment` is the
``uvicorn --factory`` / gunicorn entry point.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401 - only checking that the extra is installed
    import jinja2  # noqa: F401
except ImportError as _import_error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        'Please install the service extra to use toolbox.service: pip install "toolbox-registry[service]"'
    ) from _import_error

from toolbox.service._app import create_app
from toolbox.service._settings import ServiceSettings
from toolbox.service._startup import app_from_environment, app_from_policy_file
from toolbox.service._statuses import REASON_HTTP, STATUS_HTTP

__all__ = [
    "REASON_HTTP",
    "STATUS_HTTP",
    "ServiceSettings",
    "app_from_environment",
    "app_from_policy_file",
    "create_app",
]
