"""Running a command-line tool: an argv list, a timeout, secrets masked, one error shape.

`run` is the one subprocess runner. A tool that is not installed, does not finish within
its timeout, or (under `check`) exits non-zero raises one line naming what failed:

    <what>: <tool> is not installed or not on PATH   (or: cannot run (<why>))
    <what>: `<argv>` timed out after <timeout>s
    <what>: `<argv>` failed (exit <N>): <the last lines of its stderr, or stdout>

as a `ToolError` (whose `returncode` is 127, 126, 124 or the exit status, as a shell and
`timeout(1)` say them) or as the caller's own `BandkitError` (`error=`, made from the
line). In that
line the argv and the output have every value of `redact`, every value passed to
`errors.conceal` and every secret-named environment variable's value masked as `***`; the
output returned has the `redact` values masked.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bandkit.errors import BandkitError, masked

MISSING = 127  # what a shell says for a command it cannot find
CANNOT_RUN = 126  # what a shell says for a command it found but could not execute
TIMED_OUT = 124  # what timeout(1) says for a command it stopped
TAIL_LINES = 8  # of a failed tool's output, in its error


class ToolError(BandkitError):
    """A tool could not start, did not finish, or failed; the message is safe to show."""

    def __init__(self, message: str, *, returncode: int) -> None:
        super().__init__(message)
        self.returncode = returncode


def run(
    argv: Sequence[str],
    *,
    what: str,
    timeout: float,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    cwd: Path | None = None,
    check: bool = True,
    redact: Sequence[str] = (),
    error: Callable[[str], BandkitError] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (stdin `input`, or empty) and return what it printed; raise as the
    module says. The child gets this process's environment plus `env`, less `unset`:
    values a tool can read from its environment go there, never into argv."""
    child = None
    if env or unset:
        child = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    try:
        return _run(argv, what, timeout, input, child, cwd, check, redact)
    except ToolError as exc:
        if error is None:
            raise
        raise error(str(exc)) from None


def _run(
    argv: Sequence[str],
    what: str,
    timeout: float,
    input: str | None,
    env: dict[str, str] | None,
    cwd: Path | None,
    check: bool,
    redact: Sequence[str],
) -> subprocess.CompletedProcess[str]:
    shown = masked(shlex.join(argv), *redact)
    try:
        result = subprocess.run(
            list(argv),
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            cwd=cwd,
            env=env,
        )
    except FileNotFoundError:
        raise ToolError(
            f"{what}: {argv[0]} is not installed or not on PATH", returncode=MISSING
        ) from None
    except OSError as exc:  # not executable, say
        raise ToolError(
            f"{what}: {argv[0]} cannot run ({exc.strerror or exc})", returncode=CANNOT_RUN
        ) from None
    except subprocess.TimeoutExpired:
        raise ToolError(
            f"{what}: `{shown}` timed out after {timeout:g}s", returncode=TIMED_OUT
        ) from None
    if check and result.returncode != 0:
        lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
        detail = masked("\n".join(lines[-TAIL_LINES:]), *redact)
        raise ToolError(
            f"{what}: `{shown}` failed (exit {result.returncode}): {detail}",
            returncode=result.returncode,
        )
    if not redact:
        return result
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        _replaced(result.stdout, redact),
        _replaced(result.stderr, redact),
    )


def _replaced(text: str, values: Sequence[str]) -> str:
    for value in values:
        if value:
            text = text.replace(value, "***")
    return text
