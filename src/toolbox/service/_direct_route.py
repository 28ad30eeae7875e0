"""`DirectRoute`: a FastAPI route whose endpoint takes only the request and its path's strings.

FastAPI's request handler solves an endpoint's parameters on every request: for the
governed invoke (a path string, the request, the authentication dependency) about 26 µs
of CPU in process, a fifth of the invoke's. Starlette has matched the path already, so
such an endpoint is called with ``request.path_params`` as they are (strings, as FastAPI
would validate them). The route
is still an `APIRoute` built from the endpoint's signature: matching, ``scope["route"]``,
the exception handlers and the OpenAPI document are FastAPI's. An endpoint asking for
anything FastAPI would have to solve (a query, header or body parameter, a dependency)
is refused when the route is built, never ignored.

What it does not do: dependencies given where the router is included
(``include_router(..., dependencies=...)``) are not run, so the service includes
the routers holding such routes without any (``tests/test_service_direct_route.py``);
and FastAPI's own OpenTelemetry spans of dependency solving and of the endpoint are
not made for these routes (its request span is).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, final, get_type_hints

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["DirectRoute"]


@final
class DirectRoute(APIRoute):
    """An `APIRoute` whose endpoint is ``async def f(<path strings>, request: Request) -> Response``.

    Raises:
        TypeError: at construction, an endpoint with any other parameter or a dependency, not a
            coroutine function, or not annotated to return a `Response`.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint
        dependant = self.dependant
        request_name = dependant.request_param_name
        solved = (
            dependant.query_params,
            dependant.header_params,
            dependant.cookie_params,
            dependant.body_params,
            dependant.dependencies,
            self.dependencies,
            dependant.http_connection_param_name,
            dependant.websocket_param_name,
            dependant.response_param_name,
            dependant.background_tasks_param_name,
            dependant.security_scopes_param_name,
        )
        returns = get_type_hints(endpoint).get("return")
        if (
            any(solved)
            or request_name is None
            or not inspect.iscoroutinefunction(endpoint)
            or not (isinstance(returns, type) and issubclass(returns, Response))
            or any(field.field_info.annotation is not str for field in dependant.path_params)
        ):
            raise TypeError(
                f"{self.path}: a DirectRoute endpoint is an async def taking the request "
                "and str path parameters only, returning a Response"
            )

        async def handler(request: Request) -> Response:
            response: Response = await endpoint(**request.path_params, **{request_name: request})
            return response

        return handler
