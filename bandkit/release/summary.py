"""The one-screen summary of a release: reference, digest, what happened, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SHORT = 19  # `sha256:` + 12 hex: enough to tell digests apart; full ones are listed below


@dataclass
class Row:
    ref: str
    digest: str  # "-" when none applies
    result: str  # built, pushed, copied, stamped, verified, moved, kept, skipped, ...
    why: str
    seconds: float | None = None
    step: str = ""  # the plan step's kind (build, push-image, ...), for timing shares


def render(rows: Sequence[Row], notes: Sequence[str] = ()) -> str:
    """A table, then the notes (what was skipped and why), then each full digest once."""
    table = [("reference", "digest", "result", "time", "why")]
    for row in rows:
        short = row.digest[:SHORT] if row.digest.startswith("sha256:") else row.digest
        secs = "" if row.seconds is None else f"{row.seconds:.1f}s"
        table.append((row.ref, short, row.result, secs, row.why))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = ["release summary:"]
    lines += [
        "  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(r[:4])) + "  " + r[4]
        for r in table
    ]
    lines += [f"skipped: {note}" for note in notes]
    digests = dict.fromkeys(r.digest for r in rows if r.digest.startswith("sha256:"))
    lines += [f"digest: {d}" for d in digests]
    return "\n".join(line.rstrip() for line in lines)
