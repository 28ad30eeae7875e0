"""toolbox-http: `HttpTool`, HTTP(S) requests for toolbox agents on httpx.

Installing the package registers the ``http`` tool through the
``toolbox.providers`` entry point; a `toolbox.ToolPolicy` must still allow it.
"""

from __future__ import annotations

from toolbox_http._descriptor import HTTP_DESCRIPTOR
from toolbox_http._errors import HttpStatusError
from toolbox_http._options import HttpOptions
from toolbox_http._response import HttpResponse
from toolbox_http._tool import HttpTool

__all__ = ["HTTP_DESCRIPTOR", "HttpOptions", "HttpResponse", "HttpStatusError", "HttpTool"]
