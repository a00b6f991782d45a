"""The one base class for failures a user can cause, and the switch that shows their cause.

Library code raises a subclass of `BandkitError` with a message that says what failed and
what to do, and never names a task. The task layer (`tasks/_common.reports`) catches
`BandkitError` in one wrapper and prefixes the task's name, so a user sees
`kit.stamp: <message>` and exit `exit_code` (1 unless the class or the instance says 2),
never a traceback.

Library code raises these `from None` inside the `except` that caught the underlying
error: the user's view stays one line. Python still records the caught error as the new
one's `__context__` (`from None` only marks it suppressed), so nothing is lost: with
`BANDKIT_DEBUG=1` in the environment the wrapper also prints `debug_report`, the traceback
of the whole chain, suppressed contexts included.

Those errors' messages were never meant for the user and may quote a secret (a command's
argv, a value that failed validation). The report masks, as `***`, every value passed to
`conceal` (each `runtimes.base.Secret`, the local platform's user key, a prompted key)
and the value of every environment variable whose name says it holds one (`*KEY*`,
`*TOKEN*`, `*SECRET*`, `*PASSWORD*`).
"""

from __future__ import annotations

import os
import re
import traceback

DEBUG_ENV = "BANDKIT_DEBUG"
MASK = "***"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_MIN_SECRET = 6  # shorter values ("1", "true") would mask half the report
_concealed: set[str] = set()
# Python's separators between the errors of a chain, and one for a context that
# `from None` hid from the user's view.
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
_HIDDEN = (
    "\nDuring handling of the above exception, another exception occurred"
    " (raised `from None`: without BANDKIT_DEBUG the user sees only its message):\n\n"
)


class BandkitError(Exception):
    """An expected failure: the message is one line, safe to show (no secret values).

    `exit_code` is the task's exit status: 1, or 2 where a subclass (or an instance)
    fails closed, as the release's refusals do.
    """

    exit_code: int = 1


def conceal(*values: str) -> None:
    """Mask these values (keys this process read or minted) in every debug report."""
    _concealed.update(value for value in values if len(value) >= _MIN_SECRET)


def masked(text: str, *values: str) -> str:
    """`text` with every concealed value, every secret-named environment variable's value
    and each of `values` (any length but empty) replaced by `***`."""
    from_env = {v for k, v in os.environ.items() if _SECRET_NAME.search(k)}
    secrets = {value for value in _concealed | from_env if len(value) >= _MIN_SECRET}
    secrets.update(value for value in values if value)
    for value in sorted(secrets, key=len, reverse=True):  # a key before its prefixes
        text = text.replace(value, MASK)
    return text


def debugging() -> bool:
    """Whether `BANDKIT_DEBUG` asks for causes and tracebacks (`1`, `true`, `yes`, `on`)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def debug_report(exc: BaseException) -> str:
    """The traceback of `exc` and of every error behind it, oldest first, as Python prints
    a chain, but with the contexts that `raise ... from None` suppressed shown too, and
    every known secret masked."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    parts: list[str] = []
    for index, error in enumerate(reversed(chain)):
        if index:
            if error.__cause__ is not None:
                parts.append(_CAUSE)
            else:
                parts.append(_HIDDEN if error.__suppress_context__ else _CONTEXT)
        parts.extend(
            traceback.format_exception(type(error), error, error.__traceback__, chain=False)
        )
    return masked("".join(parts))
