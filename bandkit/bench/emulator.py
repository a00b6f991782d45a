"""Emulator benchmark: echo round-trip latency and a 50-agent scale run.

Everything is real: the emulator runs as `python -m bandkit.emulator` (a subprocess, so
its peak RSS can be read from /proc), the latency agent is the echo-agent starter's
`main.py` run from its own locked environment, the scale agents are real `band.Agent`
instances (several per process: `emulator_swarm.py`), and every reply is timed by a
human WebSocket observer (Phoenix V2 frames with the user key), never by
polling. Targets from the issue: p50 <= 20 ms; all 50 agents answer with p95 <= 1 s.
The throwaway prototype reached about 31 ms p50 (measured by polling every 20 ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bandkit import processes
from bandkit.bench import sized
from bandkit.image.facts import STARTER_DIR

REPO = Path(__file__).resolve().parents[2]
SWARM = Path(__file__).with_name("emulator_swarm.py")
SEQUENTIAL = 200
WARMUP = 5
AGENTS, ROOMS, PER_PROCESS = 50, 10, 10
PROTOTYPE_P50_MS = 31.0
TARGET_P50_MS, TARGET_SCALE_P95_S = 20.0, 1.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (from /proc)."""
    fields = processes.stat(pid)
    if fields is None:
        raise ProcessLookupError(f"no process {pid}")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Platform:
    rest_url: str
    ws_url: str
    key: str
    pid: int
    http: httpx.AsyncClient

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post(path, json=body)
        response.raise_for_status()
        data: dict[str, Any] = response.json()["data"]
        return data

    async def agent(self, name: str) -> tuple[str, str]:
        data = await self.post(
            "/api/v1/me/agents/register", {"agent": {"name": name, "description": "bench echo"}}
        )
        return data["agent"]["id"], data["credentials"]["api_key"]

    async def room(self, title: str, agent_ids: list[str]) -> str:
        room_id: str = (await self.post("/api/v1/me/chats", {"chat": {"title": title}}))["id"]
        for agent_id in agent_ids:
            body = {"participant": {"participant_id": agent_id, "role": "member"}}
            await self.post(f"/api/v1/me/chats/{room_id}/participants", body)
        return room_id

    async def mention(self, room_id: str, agent_ids: list[str], text: str) -> None:
        body = {"message": {"content": text, "mentions": [{"id": a} for a in agent_ids]}}
        await self.post(f"/api/v1/me/chats/{room_id}/messages", body)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def peak_rss_mib(self) -> float:
        peak = processes.status(self.pid, "VmHWM")  # "1234 kB"
        return int(peak.split()[0]) / 1024 if peak else float("nan")


class Observer:
    """A human observer socket (Phoenix V2 frames, user key) that timestamps each agent
    reply the moment its `message_created` push arrives. Raw frames rather than the
    SDK's client, so the measuring side costs as little CPU as possible on 2 cores."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.waiting: dict[tuple[str, str], asyncio.Future[float]] = {}
        self._joins: dict[str, asyncio.Future[None]] = {}
        self._ref = 0
        self._reader = asyncio.create_task(self._read())

    def expect(self, agent_id: str, text: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[(agent_id, f"echo: {text}")] = future
        return future

    async def join(self, room_id: str) -> None:
        self._ref += 1
        ref = str(self._ref)
        joined = self._joins[ref] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps([ref, ref, f"chat_room:{room_id}", "phx_join", {}]))
        await asyncio.wait_for(joined, 10)

    async def _read(self) -> None:
        async for raw in self.ws:
            arrived = time.perf_counter()
            _, ref, _, event, payload = json.loads(raw)
            if event == "phx_reply" and ref in self._joins:
                self._joins.pop(ref).set_result(None)
            elif event == "message_created":
                future = self.waiting.pop((payload["sender_id"], payload["content"]), None)
                if future is not None and not future.done():
                    future.set_result(arrived)

    async def close(self) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self.ws.close()


@asynccontextmanager
async def _observer(platform: Platform) -> AsyncIterator[Observer]:
    headers = {"x-api-key": platform.key}
    ws = await connect(f"{platform.ws_url}?vsn=2.0.0", additional_headers=headers)
    observer = Observer(ws)
    try:
        yield observer
    finally:
        await observer.close()


def _sync_echo_workspace(tmp: Path) -> Path:
    workspace = tmp / "echo-agent"
    workspace.mkdir()
    for name in ("main.py", "pyproject.toml", "uv.lock"):
        shutil.copy2(STARTER_DIR / name, workspace / name)
    uv = shutil.which("uv") or "uv"
    # Not the caller's venv: nox exports UV_PROJECT_ENVIRONMENT for its own session.
    env = {
        k: v for k, v in os.environ.items() if k not in ("UV_PROJECT_ENVIRONMENT", "VIRTUAL_ENV")
    }
    subprocess.run(
        [uv, "sync", "--locked", "--quiet", "--project", str(workspace)],
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    return workspace


@asynccontextmanager
async def _emulator(tmp: Path) -> AsyncIterator[Platform]:
    key = f"bench-{secrets.token_urlsafe(16)}"
    key_file = tmp / "user-key"
    key_file.write_text(key)
    key_file.chmod(0o600)
    log = (tmp / "emulator.log").open("ab")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bandkit.emulator",
        "--user-key-file",
        str(key_file),
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    assert proc.stdout is not None
    rest_url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    ws_url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    headers = {"x-api-key": key}
    async with httpx.AsyncClient(base_url=rest_url, headers=headers, timeout=30) as http:
        try:
            yield Platform(rest_url, ws_url, key, proc.pid, http)
        finally:
            proc.terminate()
            await proc.wait()
            log.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_echo_agent(
    platform: Platform, workspace: Path, agent_id: str, agent_key: str, log_path: Path
) -> subprocess.Popen[bytes]:
    """The echo starter's `main.py` as agent `agent_id`, from its own locked venv."""
    env = {
        **os.environ,
        "BAND_AGENT_ID": agent_id,
        "BAND_API_KEY": agent_key,
        "BAND_REST_URL": platform.rest_url,
        "BAND_WS_URL": platform.ws_url,
        "BAND_LOG_LEVEL": "WARNING",
    }
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [str(workspace / ".venv/bin/python"), str(workspace / "main.py")],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def latency(platform: Platform, observer: Observer, workspace: Path, tmp: Path) -> list[str]:
    agent_id, agent_key = await platform.agent("Latency Echo")
    room = await platform.room("latency", [agent_id])
    await observer.join(room)
    agent = start_echo_agent(platform, workspace, agent_id, agent_key, tmp / "latency-agent.log")
    try:
        samples: list[float] = []
        cpu_start: tuple[float, float] = (0.0, 0.0)
        warmup, sequential = sized(WARMUP, 1), sized(SEQUENTIAL, 5)
        for i in range(warmup + sequential):
            if i == warmup:
                cpu_start = (cpu_seconds(agent.pid), platform.cpu_seconds())
            text = f"ping {i}"
            seen = observer.expect(agent_id, text)
            started = time.perf_counter()
            await platform.mention(room, [agent_id], text)
            arrived = await asyncio.wait_for(seen, 60 if i == 0 else 10)
            if i >= warmup:
                samples.append((arrived - started) * 1000)
        agent_cpu = (cpu_seconds(agent.pid) - cpu_start[0]) / sequential * 1000
        emulator_cpu = (platform.cpu_seconds() - cpu_start[1]) / sequential * 1000
    finally:
        agent.terminate()
        agent.wait(30)
    p50, p95 = _pct(samples, 0.5), _pct(samples, 0.95)
    verdict = "meets" if p50 <= TARGET_P50_MS else "MISSES"
    return [
        f"echo round trip, {sequential} sequential mentions (real echo agent main.py, "
        "post -> reply seen by a human WebSocket observer):",
        f"  p50 {p50:.1f} ms, p95 {p95:.1f} ms, mean {statistics.fmean(samples):.1f} ms, "
        f"max {max(samples):.1f} ms",
        f"  CPU per round trip: echo agent (SDK) {agent_cpu:.1f} ms, "
        f"emulator {emulator_cpu:.1f} ms (7 REST calls and 5 pushes per turn)",
        f"  {verdict} the p50 <= {TARGET_P50_MS:.0f} ms target; "
        f"prototype p50 ~{PROTOTYPE_P50_MS:.0f} ms (polled): ratio {PROTOTYPE_P50_MS / p50:.2f}x",
    ]


async def _round(
    platform: Platform, observer: Observer, rooms: dict[str, list[str]], tag: str
) -> tuple[float, list[float]]:
    futures: list[tuple[float, asyncio.Future[float]]] = []
    started = time.perf_counter()

    async def post(room: str, members: list[str]) -> None:
        text = f"all hands {tag} {room[:8]}"
        pending = [observer.expect(a, text) for a in members]
        sent = time.perf_counter()
        await platform.mention(room, members, text)
        futures.extend((sent, f) for f in pending)

    await asyncio.gather(*(post(room, members) for room, members in rooms.items()))
    arrivals = await asyncio.wait_for(asyncio.gather(*(f for _, f in futures)), 120)
    latencies = [arrived - sent for (sent, _), arrived in zip(futures, arrivals, strict=True)]
    return max(arrivals) - started, latencies


async def scale(platform: Platform, observer: Observer, workspace: Path, tmp: Path) -> list[str]:
    total, room_count = sized(AGENTS, PER_PROCESS), sized(ROOMS, 2)
    agents = [await platform.agent(f"Swarm {i:02d}") for i in range(total)]
    per_room = total // room_count
    rooms: dict[str, list[str]] = {}
    for r in range(room_count):
        members = [a for a, _ in agents[r * per_room : (r + 1) * per_room]]
        rooms[await platform.room(f"swarm {r}", members)] = members
    for room in rooms:
        await observer.join(room)
    procs: list[asyncio.subprocess.Process] = []
    started = time.perf_counter()
    for p in range(0, total, PER_PROCESS):
        spec = tmp / f"swarm-{p}.json"
        chunk = [{"id": a, "key": k} for a, k in agents[p : p + PER_PROCESS]]
        spec.write_text(
            json.dumps({"rest_url": platform.rest_url, "ws_url": platform.ws_url, "agents": chunk})
        )
        spec.chmod(0o600)
        log = (tmp / f"swarm-{p}.log").open("ab")
        procs.append(
            await asyncio.create_subprocess_exec(
                str(workspace / ".venv/bin/python"),
                str(SWARM),
                str(spec),
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        )
        log.close()
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 180)
            assert line.startswith(b"ready"), f"swarm process failed to start: {line!r}"
        startup = time.perf_counter() - started
        cpu_before = platform.cpu_seconds()
        cold_total, cold = await _round(platform, observer, rooms, "cold")
        warm_total, warm = await _round(platform, observer, rooms, "warm")
        emulator_cpu = platform.cpu_seconds() - cpu_before
    finally:
        for proc in procs:
            proc.terminate()
        await asyncio.gather(*(proc.wait() for proc in procs))
    p95 = _pct(cold, 0.95)
    verdict = "meets" if len(cold) == total and p95 <= TARGET_SCALE_P95_S else "MISSES"
    return [
        f"scale: {total} echo agents in {room_count} rooms ({per_room} per room), real band.Agent "
        f"instances, {PER_PROCESS} per process ({total // PER_PROCESS} processes) to fit 2 cores:",
        f"  all agents started and connected in {startup:.1f} s",
        f"  cold round (first message each): {len(cold)}/{total} answered, "
        f"total {cold_total:.2f} s, "
        f"p50 {_pct(cold, 0.5) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms",
        f"  warm round: {len(warm)}/{total} answered, total {warm_total:.2f} s, "
        f"p50 {_pct(warm, 0.5) * 1000:.0f} ms, p95 {_pct(warm, 0.95) * 1000:.0f} ms",
        f"  {verdict} the target (all {total} answer, p95 <= {TARGET_SCALE_P95_S:.0f} s)",
        f"  emulator CPU for both rounds {emulator_cpu:.2f} s (the rest is the agents' SDK work)",
        f"  emulator peak RSS {platform.peak_rss_mib():.1f} MiB (VmHWM)",
    ]


async def _run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-emulator-") as name:
        tmp = Path(name)
        workspace = await asyncio.to_thread(_sync_echo_workspace, tmp)
        async with _emulator(tmp) as platform, _observer(platform) as observer:
            lines = await latency(platform, observer, workspace, tmp)
            lines += await scale(platform, observer, workspace, tmp)
    load = os.getloadavg()
    lines.append(
        f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} at the end (shared machine)"
    )
    return lines


def run() -> list[str]:
    return asyncio.run(_run())
