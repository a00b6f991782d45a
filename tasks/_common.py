"""What every task module shares: the error wrapper, required options, the run directory."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from invoke.context import Context
from invoke.exceptions import Exit

from bandkit.errors import BandkitError

RUN_DIR_DEFAULT = ".run"
RUN_DIR_HELP = f"where run state lives (default: the run_dir setting, {RUN_DIR_DEFAULT})"

F = TypeVar("F", bound=Callable[..., None])


def reports(name: str) -> Callable[[F], F]:
    """The one place an expected failure becomes `<name>: <message>` and its exit code:
    1, or 2 when the error says so (`exit_code = 2`: fail closed, as the release's)."""

    def wrap(body: F) -> F:
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                body(*args, **kwargs)
            except BandkitError as exc:
                code = getattr(exc, "exit_code", 1)
                raise Exit(f"{name}: {exc}", code=code if code in (1, 2) else 1) from None

        return run  # type: ignore[return-value]

    return wrap


def need(value: str, flag: str, example: str) -> str:
    """`value`, or a clear error naming the missing option and an example."""
    if not value:
        raise BandkitError(f"{flag} is required, e.g. {flag} {example}")
    return value


def resolve_run_dir(c: Context, given: str) -> Path:
    """The run directory, absolute: `--run-dir`, else the configured default."""
    return Path(given or c.config.get("run_dir", RUN_DIR_DEFAULT)).absolute()
