"""The emulator's one error type for operator-facing failures, and the API failure type.

`EmulatorError` is raised by library code for things an operator can cause (a port in
use, an unreadable state file, bad TLS paths); only `cli.main()` turns it into an exit
code. `ApiFailure` is an HTTP-level refusal that a route turns into the platform's
`{"error": {...}}` body; it never leaves the server.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from bandkit.errors import BandkitError


class Phase(StrEnum):
    """Where an operator-facing failure happened."""

    CONFIG = "config"
    STATE = "state"
    TLS = "tls"
    BIND = "bind"
    PLATFORM = "platform"


class EmulatorError(BandkitError):
    """An expected, operator-caused failure; renders as `[phase] message` (never a secret)."""

    def __init__(self, phase: Phase, message: str) -> None:
        super().__init__(f"[{phase}] {message}")
        self.phase = phase
        self.message = message


class ApiFailure(Exception):
    """A refused request: HTTP status plus the platform's error code, message and details."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def not_found(what: str) -> ApiFailure:
    return ApiFailure(404, "not_found", f"{what} not found")


def invalid(pointer: str, problem: str, message: str | None = None) -> ApiFailure:
    """A 422 in the platform's validation shape: details map a JSON pointer to problems."""
    return ApiFailure(
        422,
        "validation_error",
        message or f"{pointer} {problem}",
        {pointer: [problem]},
    )
