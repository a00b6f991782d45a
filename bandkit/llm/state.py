"""What the routes share: the stub's settings, scripts, keys, journal and counters.

`StubConfig` is everything `python -m bandkit.llm` can set; `Stub` holds what every
request reads and bumps (and the operator's credential for the stub's own pages and
control routes: `operator_key`, and page sessions from one-time login links in `pages`);
`Entry` is one request on its way through, which `Stub.finish` turns into a journal line
and a log line once it has been answered.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request

from bandkit.emulator.access import PageAccess
from bandkit.llm import anthropic
from bandkit.llm.errors import LLMStubError
from bandkit.llm.journal import Journal, Redactor, preview
from bandkit.llm.keys import KeyRing
from bandkit.llm.lines import LineCursor
from bandkit.llm.script import ScriptSet

log = logging.getLogger("bandkit.llm")


@dataclass(frozen=True)
class StubConfig:
    """Everything `python -m bandkit.llm` can set; defaults live here only."""

    host: str = "127.0.0.1"
    port: int = 0
    log_file: Path | None = None  # the JSONL request log
    shutdown_timeout: float = 5.0
    access_log: bool = False
    keep_turns: int = 2000
    max_body: int = 32 * 1024 * 1024
    # The operator's key for the pages and control routes (`/`, `/_stub/*`); empty: one
    # is generated (and only the process that started the stub knows it).
    operator_key: str = field(default="", repr=False)


@dataclass
class Entry:
    """One request on its way through; becomes a journal line when it is answered."""

    seq: int
    api: str
    provider: str
    method: str
    path: str
    t0: float
    at: str
    headers: list[tuple[str, str]]
    body: Any = None
    agent: str | None = None
    selected_by: str | None = None
    turn: int | None = None
    model: str | None = None
    stream: bool = False
    rule: str | None = None
    reply: dict[str, Any] | None = None
    request: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    error: str | None = None
    request_id: str = ""


class Stub:
    """What the routes share: scripts, keys, the journal and the counters."""

    def __init__(self, config: StubConfig, scripts: ScriptSet, keys: KeyRing) -> None:
        unknown = sorted(keys.agents() - set(scripts.agents))
        if unknown:
            raise LLMStubError(
                f"the key file binds keys to agents without a script: {', '.join(unknown)}"
            )
        self.config = config
        self.scripts = scripts
        self.keys = keys
        self.operator_key = config.operator_key or secrets.token_urlsafe(32)
        self.pages = PageAccess()  # one-time login links -> session cookies (in memory)
        redactor = Redactor([*keys.secrets(), self.operator_key])
        self.journal = Journal(config.log_file, redactor, keep=config.keep_turns)
        self.seq = 0
        self.turns: dict[str, int] = {}
        self.cursors: dict[str, LineCursor] = {}
        self.started = time.time()

    def begin(self, request: Request, api: str, provider: str) -> Entry:
        self.seq += 1
        t0 = request.scope.get("state", {}).get("t0") or time.perf_counter()
        return Entry(
            seq=self.seq,
            api=api,
            provider=provider,
            method=request.method,
            path=request.url.path,
            t0=t0,
            at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
            request_id=anthropic.new_id("req"),
        )

    def finish(self, entry: Entry, first: float | None, last: float | None) -> None:
        def ms(t: float | None) -> float | None:
            return None if t is None else round((t - entry.t0) * 1000, 3)

        turn = {
            "seq": entry.seq,
            "at": entry.at,
            "api": entry.api,
            "method": entry.method,
            "path": entry.path,
            "status": entry.status,
            "agent": entry.agent,
            "turn": entry.turn,
            "selected_by": entry.selected_by,
            "model": entry.model,
            "stream": entry.stream,
            "rule": entry.rule,
            "reply": entry.reply,
            "request": entry.request,
            "error": entry.error,
            "request_id": entry.request_id,
            "ms_first": ms(first),
            "ms_last": ms(last),
        }
        clean = self.journal.record(
            turn, {"headers": self.journal.redactor.headers(entry.headers), "body": entry.body}
        )
        level = logging.INFO if entry.status < 400 else logging.WARNING
        what = clean["error"] if entry.error else _describe(clean["reply"])
        log.log(
            level,
            "%s #%d %s %s agent=%s turn=%s rule=%s: %s (%s ms)",
            entry.api,
            entry.seq,
            entry.status,
            "stream" if entry.stream else "json",
            entry.agent,
            entry.turn,
            entry.rule,
            what,
            clean["ms_last"],
        )


def _describe(reply: dict[str, Any] | None) -> str:
    if not reply:
        return "-"
    parts = []
    if reply.get("text"):
        parts.append(f"text {preview(reply['text'], 60)!r}")
    if reply.get("tool"):
        parts.append(f"tool {reply['tool']}")
    return " + ".join(parts)


def stub_of(request: Request) -> Stub:
    stub: Stub = request.app.state.stub
    return stub
