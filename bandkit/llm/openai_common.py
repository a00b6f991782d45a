"""What the OpenAI APIs share: the error shape and the model list.

Errors are `{"error": {"message", "type", "param", "code"}}`; `GET /v1/models` answers
`{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}`.
"""

from __future__ import annotations

from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
}
CREATED = 1767225600  # 2026-01-01T00:00:00Z


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def models_page(names: list[str]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": CREATED, "owned_by": "bandkit-llm-stub"}
            for name in names
        ],
    }
