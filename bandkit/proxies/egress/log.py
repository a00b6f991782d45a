"""The egress policy log: one JSON line per decision, folded like `sbx policy log`.

Each event has `sandbox`, `decision`, `host`, `proxy_type`, `rule`, `source`, `reason`,
`time`; `summarize` folds events into the shape of `sbx policy log --json`
(`blocked_hosts` / `allowed_hosts` with counts and last seen), `render` into a table.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bandkit.fsio import read_regular

MAX_LOG_BYTES = 5 * 1024 * 1024  # the policy log rotates once to policy.log.1 past this
LOG_NAME = "policy.log"


class PolicyLog:
    """Append-only JSON lines; rotated once (to `.1`) past MAX_LOG_BYTES."""

    def __init__(self, path: Path, sandbox: str) -> None:
        self.path = path
        self.sandbox = sandbox

    def write(self, **event: Any) -> None:
        record = {"time": _now(), "sandbox": self.sandbox, **event}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path, follow_symlinks=False).st_size + len(line) > MAX_LOG_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_log(box: Path) -> list[dict[str, Any]]:
    """Every event of a sandbox's policy log, oldest first (the rotated part included)."""
    events: list[dict[str, Any]] = []
    for path in (box / f"{LOG_NAME}.1", box / LOG_NAME):
        try:
            data, _ = read_regular(path, what="policy log")
        except FileNotFoundError:
            continue
        for line in data.decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                item = json.loads(line)
                if isinstance(item, dict):
                    events.append(item)
    return events


def summarize(events: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """`sbx policy log --json`'s shape: blocked and allowed hosts with rule, type, count."""
    groups: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for event in events:
        decision = str(event.get("decision", ""))
        key = (
            decision,
            str(event.get("host", "")),
            str(event.get("proxy_type", "")),
            str(event.get("rule", "")),
            str(event.get("sandbox", "")),
        )
        row = groups.setdefault(
            key,
            {
                "host": key[1],
                "vm_name": key[4],
                "proxy_type": key[2],
                "rule": key[3],
                "reason": str(event.get("reason", "")),
                "since": str(event.get("time", "")),
                "last_seen": "",
                "count_since": 0,
            },
        )
        row["count_since"] += 1
        row["last_seen"] = str(event.get("time", ""))
    return {
        "blocked_hosts": [r for k, r in groups.items() if k[0] == "blocked"],
        "allowed_hosts": [r for k, r in groups.items() if k[0] == "allowed"],
    }


_UNPRINTABLE = re.compile(r"[^\x21-\x7e]")


def render(summary: dict[str, list[dict[str, Any]]]) -> str:
    """A text table of `summarize`'s result (sandbox-supplied text made printable)."""

    def cell(value: object, width: int = 60) -> str:
        return _UNPRINTABLE.sub("?", str(value))[:width] or "-"

    rows = [("DECISION", "HOST", "RULE", "TYPE", "COUNT", "LAST SEEN", "REASON")]
    for decision, key in (("blocked", "blocked_hosts"), ("allowed", "allowed_hosts")):
        for r in summary.get(key, []):
            rows.append(
                (
                    decision,
                    cell(r["host"]),
                    cell(r["rule"]),
                    cell(r["proxy_type"]),
                    str(r["count_since"]),
                    cell(r["last_seen"]),
                    cell(r.get("reason", ""), 80).replace("?", " "),
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )
