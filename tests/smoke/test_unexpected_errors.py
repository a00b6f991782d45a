"""A bug in a smoke probe surfaces; only a failed precondition or a platform that is down
counts as FAIL or offline.

The drills poll the agent's online flag: a platform that cannot answer reads as offline
(the platform drill takes it down), but any other error used to read as offline too, so
the drill waited out its timeout and then blamed the agent. Preflight used to turn any
error into a FAIL line naming an unrelated fix.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from band_rest.core.api_error import ApiError

from bandkit.runtimes.hostbox import BoxError
from smoke import preflight as pf
from smoke import roundtrip as rt
from smoke.drills import DrillContext


def _context(monkeypatch: pytest.MonkeyPatch, error: Exception) -> DrillContext:
    async def online(target: Any, room: str, agent_id: str) -> bool:
        raise error

    monkeypatch.setattr(rt, "online", online)
    rec = SimpleNamespace(state=SimpleNamespace(room_id="r", agent_id="a"))
    return DrillContext(rec, None, None, None, "local", watchdog_s=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error", [httpx.ConnectError("refused"), ApiError(status_code=502), ConnectionResetError()]
)
def test_a_platform_that_cannot_answer_reads_as_offline(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    assert _context(monkeypatch, error).is_online() is False


def test_a_bug_while_polling_surfaces_at_once_not_as_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = _context(monkeypatch, AttributeError("'NoneType' object has no attribute 'data'"))
    with pytest.raises(AttributeError, match="no attribute 'data'"):
        ctx.wait_online(False, timeout_s=30)  # it would have answered "offline" at once


def test_preflight_fails_an_unmet_precondition_and_surfaces_a_bug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_uv() -> bool:
        raise BoxError("no uv binary found")

    monkeypatch.setattr(pf, "_uv", no_uv)
    lines = [check.line() for check in pf.checks(tmp_path / "run")]
    assert "FAIL  uv installed: install uv" in lines

    def broken() -> bool:
        raise TypeError("a bug in the probe")

    monkeypatch.setattr(pf, "_uv", broken)
    with pytest.raises(TypeError, match="a bug in the probe"):
        pf.checks(tmp_path / "run")
