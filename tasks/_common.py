"""What every task module shares: the error wrapper, required options, the run directory."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from invoke.context import Context
from invoke.exceptions import Exit

from bandkit.errors import BandkitError, debug_report, debugging
from bandkit.terminal import printable

RUN_DIR_DEFAULT = ".run"
RUN_DIR_HELP = f"where run state lives (default: the run_dir setting, {RUN_DIR_DEFAULT})"

F = TypeVar("F", bound=Callable[..., None])


def reports(name: str) -> Callable[[F], F]:
    """The one place an expected failure becomes `<name>: <message>` and its exit code:
    the error's `exit_code`, 1 or 2 (fail closed, as the release's). The message may quote
    a sandbox's text (a log tail, a band.yaml value): its control characters are escaped
    (`terminal.printable`). With `BANDKIT_DEBUG=1` the error's traceback and its chained
    causes (`errors.debug_report`) go to stderr first, escaped the same way."""

    def wrap(body: F) -> F:
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                body(*args, **kwargs)
            except BandkitError as exc:
                if debugging():
                    print(printable(debug_report(exc)), file=sys.stderr, end="", flush=True)
                code = exc.exit_code
                message = printable(f"{name}: {exc}")
                raise Exit(message, code=code if code in (1, 2) else 1) from None

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
