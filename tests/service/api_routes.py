"""The app's routes as the tests that cover all of them see them: read from the app itself, so a new
route is covered without touching the tests, and a valid request body of each request model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from tests.service.conftest import HARDWARE
from tests.service.onnx_models import encoded, mlp
from tuner.service.app import create_app
from tuner.service.settings import Settings

SPEC = {"op": "matmul", "params": {"M": 16, "N": 16, "K": 8}}
ONNX_MLP = encoded(mlp())
# A valid body of each request model, by model name (test_hostile_input checks that none is missing).
EXAMPLES: dict[str, dict[str, Any]] = {
    "TaskCreate": {"workload": SPEC, "trials": 4, "strategy": "random", "seed": 1},
    "BestQuery": {"workload": SPEC, "k": 2},
    "WorkerRegister": {"name": "w", "hardware": HARDWARE},
    "LeaseRequest": {"max": 2},
    "ResultsIn": {
        "results": [
            {
                "candidate_id": 1,
                "status": "ok",
                "run_secs": [1e-4, 2e-4],
                "build_secs": 0.5,
                "message": "",
                "timing": {"repeat": 5, "min_repeat_ms": 5.0, "flush_cache": False},
            }
        ]
    },
    "ReleaseIn": {"candidate_ids": [1, 2]},
    "HeartbeatIn": {"holding": [1, 2]},
    "TokenCreate": {"role": "client", "name": "someone"},
    "HardwareApproval": {"peak_gflops": 250.0},
    "ModelCreate": {"onnx": ONNX_MLP, "trials": 8, "name": "mlp", "scheduler": "round-robin", "seed": 1},
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # the template: /v1/tasks/{task_id}
    body: str | None  # the request model's name
    query: tuple[str, ...]
    documented: bool  # in the OpenAPI schema; the others (docs pages, the dashboard's shell) are static

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    def valid_body(self) -> dict[str, Any] | None:
        return EXAMPLES[self.body] if self.body else None


def endpoints(app: FastAPI) -> list[Endpoint]:
    """Every method of every route the app serves, its own and FastAPI's (docs, schema)."""
    schema = {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        for method in sorted((context.methods or set()) - {"HEAD"}):
            documented = (method, context.path) in schema
            if isinstance(route, APIRoute):
                body = _model_name(route.body_field.field_info.annotation) if route.body_field else None
                query = tuple(p.name for p in route.dependant.query_params)
                found.append(Endpoint(method, context.path, body, query, documented))
            else:
                found.append(Endpoint(method, context.path, None, (), documented))
    return found


def _model_name(annotation: Any) -> str:
    """The request model's name, also of an optional body (`Model | None`)."""
    models = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    return str(models[0].__name__)


# The routes of an app that is never started (serving the schema opens no database).
ENDPOINTS = endpoints(create_app(Settings(database_url="sqlite://")))
