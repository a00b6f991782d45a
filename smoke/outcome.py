"""A probe's outcome, recorded in the state before it returns (`passed`, or `fail` and
the `ProbeFailed` to raise: the task then exits 1), and the text helpers probe details
go through: `reason` (an exception in a few words), `redact` (the user key replaced)."""

from __future__ import annotations

from bandkit.errors import BandkitError
from smoke import state as st
from smoke.context import Recorder
from smoke.state import Label
from smoke.target import Target


class ProbeFailed(BandkitError):
    """A probe failed; it is recorded in the state already."""


def fail(rec: Recorder, label: Label, marker: str, detail: str) -> ProbeFailed:
    rec.update(st.record_probe, label, marker, False, detail)
    rec.log(f"probe {label}: FAIL: {detail}")
    return ProbeFailed(f"probe {label} failed: {detail}")


def passed(rec: Recorder, label: Label, marker: str, detail: str) -> None:
    rec.update(st.record_probe, label, marker, True, detail)
    rec.log(f"probe {label}: PASS: {detail}")


def reason(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}" if status else f"{type(exc).__name__}: {exc}"


def redact(text: str, target: Target) -> str:
    return text.replace(target.user_key, "***") if target.user_key else text
