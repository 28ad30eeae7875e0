"""`DirectRoute`: the governed invoke is called with its path strings and the request, nothing else.

It skips FastAPI's parameter solving, so anything that solving would have done must be
refused when the route is built (a query, header, cookie or body parameter, a dependency,
a sync endpoint, an answer FastAPI would have to serialize), and the service must include
such routes without include-level dependencies, which it could not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response
from starlette.testclient import TestClient

from toolbox import Effect, RiskClass, ToolPolicy, tool
from toolbox.auth import ApiKeyFile, CredentialAuthenticator
from toolbox.service import create_app
from toolbox.service._direct_route import DirectRoute
from toolbox.testing.credentials import write_api_keys


async def needs_nothing() -> None:
    return None


class Order(BaseModel):
    amount: int


async def with_query(name: str, request: Request, page: int = Query(1)) -> Response:
    return Response()


async def with_header(name: str, request: Request, x_tenant: str = Header("")) -> Response:
    return Response()


async def with_body(name: str, request: Request, order: Annotated[Order, Body()]) -> Response:
    return Response()


async def with_dependency(
    name: str, request: Request, _dep: Annotated[None, Depends(needs_nothing)]
) -> Response:
    return Response()


async def with_int_path(name: int, request: Request) -> Response:
    return Response()


async def without_request(name: str) -> Response:
    return Response()


def sync_endpoint(name: str, request: Request) -> Response:
    return Response()


async def returns_a_dict(name: str, request: Request) -> dict[str, Any]:
    return {}


async def with_response_parameter(name: str, request: Request, response: Response) -> Response:
    return response


@pytest.mark.parametrize(
    "endpoint",
    [
        with_query,
        with_header,
        with_body,
        with_dependency,
        with_int_path,
        without_request,
        sync_endpoint,
        returns_a_dict,
        with_response_parameter,
    ],
)
def test_an_endpoint_with_anything_to_solve_is_refused_when_built(endpoint: Callable[..., Any]) -> None:
    router = APIRouter()
    with pytest.raises(TypeError, match="DirectRoute endpoint"):
        router.add_api_route("/{name}/go", endpoint, methods=["POST"], route_class_override=DirectRoute)


def test_a_route_level_dependency_is_refused_when_built() -> None:
    async def endpoint(name: str, request: Request) -> Response:
        return Response()

    router = APIRouter()
    with pytest.raises(TypeError, match="DirectRoute endpoint"):
        router.add_api_route(
            "/{name}/go",
            endpoint,
            methods=["POST"],
            dependencies=[Depends(needs_nothing)],
            route_class_override=DirectRoute,
        )


@pytest.mark.parametrize("path", ["/v1/add/go", "/v1/a%20b.c/go", "/v1/x%2Fy/go", "/v1/%C3%A9t%C3%A9/go"])
def test_the_endpoint_gets_the_path_strings_fastapi_would_give(path: str) -> None:
    """The same name as FastAPI's own solving, for plain and percent-encoded paths."""
    seen: dict[str, tuple[str, bool]] = {}

    def app_with(route_class: type[APIRoute]) -> FastAPI:
        async def endpoint(name: str, request: Request) -> Response:
            seen[route_class.__name__] = (name, request.scope["route"].path == "/v1/{name}/go")
            return JSONResponse({"name": name})

        app = FastAPI()
        router = APIRouter(prefix="/v1")
        router.add_api_route("/{name}/go", endpoint, methods=["POST"], route_class_override=route_class)
        app.include_router(router)
        return app

    answers = []
    for route_class in (APIRoute, DirectRoute):
        with TestClient(app_with(route_class)) as client:
            answer = client.post(path)
            answers.append((answer.status_code, answer.content))
    assert answers[0] == answers[1]
    assert seen.get("APIRoute") == seen.get("DirectRoute")


def _app(tmp_path: Any) -> FastAPI:
    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    write_api_keys(tmp_path / "keys.toml", {"ci": {"tenant": "acme", "roles": ["caller"]}})
    return create_app(
        policy=ToolPolicy.standard(),
        authenticator=CredentialAuthenticator(api_keys=ApiKeyFile(tmp_path / "keys.toml")),
        providers=[add],
        discover=False,
        env={},
        console=False,
    )


def _direct_routes(router: Any) -> list[APIRoute]:
    return [route for route in router.routes if isinstance(route, DirectRoute)]


def _served_direct_routes(app: Any) -> list[tuple[str, list[Any]]]:
    """(path, the dependencies added where its router was included) of each DirectRoute served.

    Recent FastAPI keeps an included router by reference (``include_context``) and adds its
    include-level dependencies per request, which a DirectRoute would not run; older releases
    copy each route into the app with those dependencies as its own (refused when built).
    """
    found: list[tuple[str, list[Any]]] = []
    for route in app.router.routes:
        context = getattr(route, "include_context", None)
        if context is not None:
            found += [(r.path, list(context.dependencies)) for r in _direct_routes(context.included_router)]
        elif isinstance(route, DirectRoute):
            found.append((route.path, list(route.dependencies)))
    return found


def test_the_service_includes_its_direct_routes_without_dependencies(tmp_path: Any) -> None:
    """An include-level dependency would not run for a DirectRoute: the service adds none."""
    app = _app(tmp_path)
    assert _served_direct_routes(app) == [("/v1/tools/{name}/invoke", [])]
    assert not app.router.dependencies


def test_the_openapi_document_still_names_the_path_parameter(tmp_path: Any) -> None:
    operation = _app(tmp_path).openapi()["paths"]["/v1/tools/{name}/invoke"]["post"]
    assert operation["parameters"] == [
        {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "title": "Name"}}
    ]
    assert "requestBody" not in operation and "200" in operation["responses"]
