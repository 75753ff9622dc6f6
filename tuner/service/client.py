"""A small client of the coordinator's REST API, for the `tuner submit/status/best/show` commands and
for scripts: each method is one request and returns the decoded JSON."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """The coordinator answered with an error; `status` is the HTTP status, `detail` its explanation."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail

    @property
    def summary(self) -> str:
        """The detail in one line: each culprit of a validation error with its field, or the text."""
        if not isinstance(self.detail, list):
            return str(self.detail)
        return "; ".join(_culprit(d) if isinstance(d, dict) else str(d) for d in self.detail)


def _culprit(error: dict[str, Any]) -> str:
    field = ".".join(str(part) for part in error.get("loc", [])[1:])  # after "body", "query"...
    message = str(error.get("msg", error))
    return message if not field or message.startswith(field) else f"{field}: {message}"


class Client:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def submit(
        self,
        workload: dict[str, Any],
        *,
        trials: int,
        strategy: str = "evolutionary",
        seed: int = 0,
        hardware: str | None = None,
    ) -> dict[str, Any]:
        body = {
            "workload": workload,
            "trials": trials,
            "strategy": strategy,
            "seed": seed,
            "hardware": hardware,
        }
        return self._json("POST", "/v1/tasks", body)

    def tasks(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/tasks")

    def task(self, task_id: int) -> dict[str, Any]:
        return self._json("GET", f"/v1/tasks/{task_id}")

    def cancel(self, task_id: int) -> dict[str, Any]:
        return self._json("POST", f"/v1/tasks/{task_id}/cancel")

    def best(
        self, workload: dict[str, Any], *, hardware: str | None = None, k: int = 1
    ) -> list[dict[str, Any]]:
        return self._json("POST", "/v1/best", {"workload": workload, "hardware": hardware, "k": k})

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.http.request(method, path, json=body)
        if response.is_error:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail)
        return response.json()
