"""The sweep of stale demo agents tolerates what the network and the platform do, and
says what it was; a bug in the sweep surfaces with its traceback, not as a type name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from band_rest.core.api_error import ApiError

from bandkit.demo import DemoError, cast_ops
from examples.docker_demo.cast import DEMO_NAMES, MARKER

URL = "http://127.0.0.1:9"
STALE = sorted(DEMO_NAMES)[0]


def _platform(monkeypatch: pytest.MonkeyPatch, listing: Exception | None) -> list[str]:
    """A platform whose listing raises `listing` for every name but STALE, which has one
    stale demo agent; returns the ids deleted."""

    async def list_my_agents(*, name: str, **_: Any) -> Any:
        if name != STALE and listing is not None:
            raise listing
        agent = SimpleNamespace(id="a-1", name=name, description=f"old {MARKER}")
        return SimpleNamespace(data=[agent] if name == STALE else [])

    @asynccontextmanager
    async def client(api_key: str, rest_url: str) -> AsyncIterator[Any]:
        yield SimpleNamespace(human_api_agents=SimpleNamespace(list_my_agents=list_my_agents))

    deleted: list[str] = []

    async def delete_agent(*, api_key: str, rest_url: str, agent_id: str) -> None:
        deleted.append(agent_id)

    monkeypatch.setattr(cast_ops, "client", client)
    monkeypatch.setattr(cast_ops, "delete_agent", delete_agent)
    return deleted


def test_a_failed_listing_is_skipped_with_what_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    deleted = _platform(monkeypatch, httpx.ConnectError("refused"))
    lines: list[str] = []
    assert cast_ops.sweep_stale(api_key="k", rest_url=URL, log=lines.append) == ["a-1"]
    assert deleted == ["a-1"]
    skipped = [line for line in lines if line.endswith("skipped")]
    assert len(skipped) == len(DEMO_NAMES) - 1
    assert all("(ConnectError: refused)" in line for line in skipped), skipped


def test_a_failed_delete_says_what_the_platform_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    _platform(monkeypatch, None)

    async def refuses(**_: Any) -> None:
        raise ApiError(status_code=500, body={"error": {"message": "database down"}})

    monkeypatch.setattr(cast_ops, "delete_agent", refuses)
    with pytest.raises(DemoError, match=r"failed: HTTP 500: database down$"):
        cast_ops.sweep_stale(api_key="k", rest_url=URL, log=lambda _: None)


def test_a_bug_in_the_sweep_surfaces(monkeypatch: pytest.MonkeyPatch) -> None:
    _platform(monkeypatch, KeyError("data"))
    with pytest.raises(KeyError):
        cast_ops.sweep_stale(api_key="k", rest_url=URL, log=lambda _: None)
