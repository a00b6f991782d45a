"""Every request, as a JSONL line and a turn on `/_stub/turns`, with secrets redacted.

A line (and a turn) says: `seq`, `at` (UTC), `api`, `method`, `path`, `status`, `agent`,
`turn` (the agent's request count), `selected_by`, `model`, `stream`, `rule`, `reply`
(text, tool, arguments), `request` (the last message, tools offered, last tool and its
result, new turn or not), `error`, and timings in milliseconds from the request's arrival:
`ms_first` (first event, or the body, sent) and `ms_last` (last event sent). The JSONL line
adds the request `headers` and `body`.

Redaction, before anything is kept or written: every configured key, wherever it appears,
and the whole value of `Authorization`, `Proxy-Authorization`, `x-api-key`, `api-key`,
`Cookie` and the operator's `X-Bandkit-Operator-Key` headers become `***`.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bandkit.llm.errors import LLMStubError

MASK = "***"
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "x-bandkit-operator-key",  # == pages.OPERATOR_HEADER
    }
)
PREVIEW = 400  # characters of message text kept in a turn

log = logging.getLogger("bandkit.llm")


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a key that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        return {
            name.lower(): MASK if name.lower() in SECRET_HEADERS else self.text(value)
            for name, value in headers
        }


def preview(text: str | None, limit: int = PREVIEW) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text)} chars)"


class Journal:
    """The last `keep` turns in memory and, with `path`, every request appended as JSONL."""

    def __init__(self, path: Path | None, redactor: Redactor, *, keep: int = 2000) -> None:
        self.redactor = redactor
        self.path = path
        self._turns: deque[dict[str, Any]] = deque(maxlen=keep)
        self._fd: int | None = None
        self.count = 0
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(
                    path,
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                )
                os.fchmod(self._fd, 0o600)
            except OSError as exc:
                raise LLMStubError(
                    f"cannot open the request log {path} ({exc.strerror}); pick another --log-file"
                ) from None

    def record(self, turn: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
        """Keep `turn` (redacted) and append it with `extra` (headers, body) as one line."""
        clean: dict[str, Any] = self.redactor.data(dict(turn))
        self._turns.append(clean)
        self.count += 1
        if self._fd is not None:
            line = {**clean, **self.redactor.data(dict(extra))}
            data = (json.dumps(line, separators=(",", ":"), default=str) + "\n").encode()
            try:
                os.write(self._fd, data)
            except OSError as exc:
                log.error("cannot append to %s: %s", self.path, exc.strerror)
        return clean

    def turns(self, *, agent: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        return [
            t
            for t in self._turns
            if t["seq"] > since and (agent is None or t.get("agent") == agent)
        ]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per agent: requests, errors, and the p50 / max of `ms_last` among the kept turns."""
        by_agent: dict[str, list[dict[str, Any]]] = {}
        for turn in self._turns:
            by_agent.setdefault(turn.get("agent") or "(none)", []).append(turn)
        out: dict[str, dict[str, Any]] = {}
        for agent, turns in by_agent.items():
            times = [t["ms_last"] for t in turns if t.get("ms_last") is not None]
            out[agent] = {
                "requests": len(turns),
                "errors": sum(1 for t in turns if t["status"] >= 400),
                "p50_ms": round(statistics.median(times), 3) if times else None,
                "max_ms": round(max(times), 3) if times else None,
            }
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
