"""The launcher's one failure type, and the phases it can name."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Launch phases, in the order they run (also the names errors carry)."""

    IDENTITY = "identity"
    CONFIG = "config"
    PATHS = "paths"
    CREDENTIALS = "credentials"
    REPO = "repo"
    SYNC = "sync"
    EXEC = "exec"


class LauncherError(Exception):
    """A launch failure attributed to a phase; renders as `[phase] message`.

    Messages state the rule, the offending path or name, and the fix. They never
    contain a secret value or a whole environment, so they are safe to log.
    Deliberately not a ValueError: a broad `except ValueError` must not swallow it.
    """

    def __init__(self, phase: Phase, message: str) -> None:
        self.phase = phase
        self.message = message
        super().__init__(f"[{phase}] {message}")
