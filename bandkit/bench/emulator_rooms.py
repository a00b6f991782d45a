"""Emulator benchmark: an agent creates a room, recruits a running peer and gets its answer.

The multi-agent path end to end, all real: the emulator is `python -m bandkit.emulator`, the
peer is the echo-agent starter's `main.py` (real `band.Agent`) from its own locked
environment, and the recruiting agent calls the agent API with its own key, as the SDK's
`create_chatroom` / `add_participant` / `send_message` tools do. Per round: create a room,
invite the echo agent (it learns of the room from the `room_added` push and joins it), post
a mention; the reply is timed by a human WebSocket observer. No target in the issue: these
figures are for comparison across changes.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from bandkit.bench import sized
from bandkit.bench.emulator import (
    Observer,
    Platform,
    _emulator,
    _observer,
    _pct,
    _sync_echo_workspace,
    start_echo_agent,
)

ROUNDS, WARMUP = 30, 3


async def _post(client: httpx.AsyncClient, path: str, body: Mapping[str, object]) -> str:
    response = await client.post(path, json=body)
    response.raise_for_status()
    created: str = response.json()["data"]["id"]
    return created


async def _round(
    planner: httpx.AsyncClient, observer: Observer, echo_id: str, i: int
) -> tuple[float, float, float]:
    """(create ms, invite ms, invite -> reply ms) for one fresh room."""
    started = time.perf_counter()
    room = await _post(planner, "/api/v1/agent/chats", {"chat": {"title": f"delegation {i}"}})
    created = time.perf_counter()
    await observer.join(room)
    text = f"task {i}"
    seen = observer.expect(echo_id, text)
    invite_at = time.perf_counter()
    body = {"participant": {"participant_id": echo_id, "role": "member"}}
    await _post(planner, f"/api/v1/agent/chats/{room}/participants", body)
    invited = time.perf_counter()
    message = {"content": text, "mentions": [{"id": echo_id}]}
    await _post(planner, f"/api/v1/agent/chats/{room}/messages", {"message": message})
    arrived = await asyncio.wait_for(seen, 60 if i == 0 else 20)
    return (created - started) * 1000, (invited - invite_at) * 1000, (arrived - invite_at) * 1000


async def delegation(
    platform: Platform, observer: Observer, workspace: Path, tmp: Path
) -> list[str]:
    echo_id, echo_key = await platform.agent("Echo Peer")
    _, planner_key = await platform.agent("Planner")
    agent = start_echo_agent(platform, workspace, echo_id, echo_key, tmp / "echo-peer.log")
    headers = {"x-api-key": planner_key}
    try:
        async with httpx.AsyncClient(base_url=platform.rest_url, headers=headers) as planner:
            count = sized(WARMUP, 1) + sized(ROUNDS, 2)
            rounds = [await _round(planner, observer, echo_id, i) for i in range(count)]
    finally:
        agent.terminate()
        agent.wait(30)
    warmup = sized(WARMUP, 1)
    create, invite, answer = (list(column) for column in zip(*rounds[warmup:], strict=True))
    return [
        f"delegation, {len(rounds) - warmup} fresh rooms (agent creates room, invites a "
        "running echo agent, mentions it; reply seen by a human WebSocket observer):",
        f"  create room p50 {_pct(create, 0.5):.1f} ms; invite p50 {_pct(invite, 0.5):.1f} ms",
        f"  invite -> reply (room_added, join, /next or push, answer): p50 "
        f"{_pct(answer, 0.5):.0f} ms, p95 {_pct(answer, 0.95):.0f} ms, max {max(answer):.0f} ms",
        f"  first room (cold) invite -> reply {rounds[0][2]:.0f} ms",
    ]


async def _run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-emulator-rooms-") as name:
        tmp = Path(name)
        workspace = await asyncio.to_thread(_sync_echo_workspace, tmp)
        async with _emulator(tmp) as platform, _observer(platform) as observer:
            return await delegation(platform, observer, workspace, tmp)


def run() -> list[str]:
    return asyncio.run(_run())
