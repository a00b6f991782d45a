"""The smoke's probes: provision, a marker round trip per label, cleanup.

Labels (`smoke.state.Label`): `provision` makes a fresh agent and room for the run,
`initial` and the `after-*` labels prove a round trip, `cleanup` reaps what the run made.

- **Provision** (`provision`): each id is saved to the state before the next fallible
  step: the sandbox and agent names first, the agent id as soon as the kit registered
  it (read from the provisioning manifest when a later step failed), the room id
  ("Sandbox smoke — <run_id>") once created; adding the agent to the room is its own
  step; then the agent must be online in that room.
- **Round trip**: a human WebSocket observer (the SDK's own `WebSocketClient` with the
  user key) joins the room; a mention carrying `marker:<token>` (12 hex) is sent over
  REST; the probe passes when the observer sees the agent's `sandbox-ack:<token>`. The
  REST message list is polled as a fallback every `FALLBACK_POLL_S` (a reply the
  observer missed, e.g. while its own socket reconnects); the detail says which one saw
  the reply.
- **Cleanup**: deletes the run's room, unprovisions the sandbox (sandbox, stored key,
  platform agent, manifest), reaps ids carried over from earlier runs and removes the
  workspace copy. A reap that fails keeps its id in the state for a retry.

Every probe is appended to the state (a retry appends another attempt) before it
returns; a failed one raises `ProbeFailed` after recording, so the task exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from band_rest import ChatMessageRequest, ChatMessageRequestMentionsItem, ParticipantRequest
from band_rest.human_api_chats.types.create_my_chat_room_request_chat import (
    CreateMyChatRoomRequestChat,
)

from bandkit.errors import BandkitError
from bandkit.kit import agent_check, commands
from bandkit.kit.platform_api import NO_RETRY, client, delete_agent
from bandkit.kit.provision import ProvisionError, ProvisionRequest
from bandkit.kit.rooms import RoomError, delete_room, find_rooms_by_title
from bandkit.manifest import Kind, Manifest, ManifestError
from bandkit.runtimes.base import Runtime, SandboxError, SandboxStatus
from bandkit.runtimes.select import get_runtime
from smoke import state as st
from smoke.context import AGENT_SRC, Layout, Recorder
from smoke.state import Label, ReapKind
from smoke.target import Target

TOKEN_BYTES = 6  # 12 hex characters
ACK_PREFIX = "sandbox-ack:"
MARKER_PREFIX = "marker:"
REPLY_TIMEOUT_S = 30.0
ONLINE_TIMEOUT_S = 120.0  # the first start of a box syncs the agent's venv
FALLBACK_POLL_S = 2.0
KIT_SPEC_DIR = Path(__file__).resolve().parents[1] / "docker" / "band_python_kit"
DESCRIPTION = "The sandbox smoke's deterministic agent (answers marker:<token>), run {run_id}"


T = TypeVar("T")


class ProbeFailed(BandkitError):
    """A probe failed; it is recorded in the state already."""


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def room_title(run_id: str) -> str:
    return f"Sandbox smoke — {run_id}"


def sandbox_name(run_id: str) -> str:
    return f"smoke-{run_id}"


def agent_name(run_id: str) -> str:
    return f"Sandbox smoke {run_id}"


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run one async step to completion from the (synchronous) orchestration."""

    async def main() -> T:
        return await make()

    return asyncio.run(main())


# ---------------------------------------------------------------- the human side


async def send_marker(target: Target, room: str, agent_id: str, name: str, token: str) -> str:
    """Mention the agent with `marker:<token>` over REST; the message id."""
    async with client(target.user_key, target.rest_url) as rest:
        sent = await rest.human_api_messages.send_my_chat_message(
            chat_id=room,
            message=ChatMessageRequest(
                content=f"@{name} smoke probe {MARKER_PREFIX}{token}",
                mentions=[ChatMessageRequestMentionsItem(id=agent_id, name=name)],
            ),
            request_options=NO_RETRY,
        )
    return str(sent.data.id)


async def find_ack(
    target: Target, room: str, agent_id: str, token: str
) -> tuple[bool, datetime | None]:
    """(found, the platform's timestamp of it) for the agent's ack of `token` (REST)."""
    async with client(target.user_key, target.rest_url) as rest:
        listed = await rest.human_api_messages.list_my_chat_messages(
            chat_id=room, limit=50, request_options=NO_RETRY
        )
    wanted = f"{ACK_PREFIX}{token}"
    for m in listed.data:
        if str(getattr(m, "sender_id", "")) == agent_id and wanted in str(m.content or ""):
            at = getattr(m, "inserted_at", None)
            return True, at if isinstance(at, datetime) and at.tzinfo else None
    return False, None


async def ack_listed(target: Target, room: str, agent_id: str, token: str) -> bool:
    """True when the room's latest messages hold the agent's ack for `token` (REST)."""
    found, _ = await find_ack(target, room, agent_id, token)
    return found


async def online(target: Target, room: str, agent_id: str) -> bool:
    """Whether the platform lists the agent online in `room`."""
    async with client(target.user_key, target.rest_url) as rest:
        listed = await rest.human_api_participants.list_my_chat_participants(
            chat_id=room, request_options=NO_RETRY
        )
    return any(str(p.id) == agent_id and bool(getattr(p, "online", False)) for p in listed.data)


@dataclass
class Observer:
    """A human WebSocket observer of one room: the SDK's `WebSocketClient`, user key."""

    target: Target
    room: str
    agent_id: str
    acks: dict[str, float] = field(default_factory=dict)  # token -> monotonic time seen
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _client: Any = None

    async def __aenter__(self) -> Observer:
        from band.client.streaming import WebSocketClient

        self._client = WebSocketClient(self.target.ws_url, self.target.user_key)
        await self._client.__aenter__()
        try:
            await self._client.join_chat_room_channel(self.room, self._created, self._updated)
        except BaseException:
            await self._client.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._client.__aexit__(None, None, None)

    async def _updated(self, payload: Any) -> None:
        """Delivery-status updates: not needed, taken so the SDK does not warn."""

    async def _created(self, payload: Any) -> None:
        content = str(getattr(payload, "content", "") or "")
        if str(getattr(payload, "sender_id", "")) != self.agent_id:
            return
        for word in content.split():
            if word.startswith(ACK_PREFIX):
                self.acks.setdefault(word.removeprefix(ACK_PREFIX), time.monotonic())
        self._changed.set()

    async def wait(self, token: str, timeout_s: float) -> tuple[float, str]:
        """(monotonic time the ack was seen, "WebSocket" or "polling"); TimeoutError."""
        deadline = time.monotonic() + timeout_s
        next_poll = time.monotonic() + FALLBACK_POLL_S
        while token not in self.acks:
            now = time.monotonic()
            if now >= next_poll:
                if await ack_listed(self.target, self.room, self.agent_id, token):
                    return time.monotonic(), "polling (the observer missed it)"
                next_poll = time.monotonic() + FALLBACK_POLL_S
            if now >= deadline:
                if await ack_listed(self.target, self.room, self.agent_id, token):
                    return time.monotonic(), "polling (the observer missed it)"
                raise TimeoutError(f"no {ACK_PREFIX}{token} within {timeout_s:.0f}s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(next_poll, deadline) - now)
        return self.acks[token], "WebSocket"


@dataclass(frozen=True)
class Ack:
    token: str
    seconds: float  # from the send (round trip) or from `since` (await_ack)
    via: str

    def describe(self, what: str) -> str:
        return f"{what} {ACK_PREFIX}{self.token} in {self.seconds:.2f}s over {self.via}"


async def round_trip(
    target: Target, room: str, agent_id: str, name: str, *, timeout_s: float = REPLY_TIMEOUT_S
) -> Ack:
    """Observer joins, marker sent, the agent's ack awaited; TimeoutError if none."""
    token = new_token()
    async with Observer(target, room, agent_id) as observer:
        started = time.monotonic()
        await send_marker(target, room, agent_id, name, token)
        seen, via = await observer.wait(token, timeout_s)
    return Ack(token, seen - started, via)


async def await_ack(
    target: Target,
    room: str,
    agent_id: str,
    token: str,
    *,
    since: float,
    since_wall: datetime,
    timeout_s: float,
) -> Ack:
    """The ack of a marker sent earlier (during an outage); seconds counted from `since`
    (monotonic; `since_wall` is the same moment by the wall clock).

    When the agent answered before the observer had joined, the reply is read over REST
    and timed by the platform's own timestamp of it (the local platform shares this
    host's clock)."""
    async with Observer(target, room, agent_id) as observer:
        found, at = await find_ack(target, room, agent_id, token)
        if found:  # answered before the observer joined
            if at is not None:
                seconds = (at - since_wall).total_seconds()
                return Ack(token, seconds, "REST (before the observer joined; platform time)")
            return Ack(token, time.monotonic() - since, "REST (before the observer joined)")
        seen, via = await observer.wait(token, timeout_s)
    return Ack(token, seen - since, via)


# ---------------------------------------------------------------- provisioning


def runtime_for(layout: Layout, name: str, manifest: Manifest | None = None) -> Runtime:
    return get_runtime(name, run_dir=layout.kit_dir / "runtimes", manifest=manifest)


def copy_workspace(layout: Layout, run_id: str) -> Path:
    """A fresh copy of smoke/agent for this run, readable by the agent uid."""
    dest = layout.workspace(run_id)
    if dest.exists():
        shutil.rmtree(dest)
    for parent in (layout.kit_dir, dest.parent):
        parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        parent.chmod(0o755)
    shutil.copytree(AGENT_SRC, dest, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    for path in (dest, *dest.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def registered_agent(layout: Layout, sandbox: str, api_key: str) -> str:
    """The agent id the kit's manifest recorded for `sandbox` ("" when none)."""
    path = layout.manifest(sandbox)
    if not path.exists():
        return ""
    try:
        with Manifest.open(path, secrets=[api_key]) as manifest:
            ids = [r.details.get("id", "") for r in manifest.resources if r.kind is Kind.AGENT]
    except ManifestError:
        return ""
    return next((i for i in ids if i), "")


async def _create_room(target: Target, title: str) -> str:
    async with client(target.user_key, target.rest_url) as rest:
        made = await rest.human_api_chats.create_my_chat_room(
            chat=CreateMyChatRoomRequestChat(title=title), request_options=NO_RETRY
        )
    return str(made.data.id)


async def _add_member(target: Target, room: str, agent_id: str) -> None:
    async with client(target.user_key, target.rest_url) as rest:
        await rest.human_api_participants.add_my_chat_participant(
            chat_id=room,
            participant=ParticipantRequest(participant_id=agent_id, role="member"),
            request_options=NO_RETRY,
        )


def fail(rec: Recorder, label: Label, marker: str, detail: str) -> ProbeFailed:
    rec.update(st.record_probe, label, marker, False, detail)
    rec.log(f"probe {label}: FAIL: {detail}")
    return ProbeFailed(f"probe {label} failed: {detail}")


def passed(rec: Recorder, label: Label, marker: str, detail: str) -> None:
    rec.update(st.record_probe, label, marker, True, detail)
    rec.log(f"probe {label}: PASS: {detail}")


def provision(
    rec: Recorder,
    layout: Layout,
    target: Target,
    *,
    runtime: str,
    agent_env: dict[str, str] | None = None,
    online_timeout_s: float = ONLINE_TIMEOUT_S,
    image: str | None = None,
) -> float:
    """Make the run's sandbox, agent and room; seconds until the agent was online.
    `image`: the docker runtime's image (None: its default)."""
    run_id = rec.state.run_id
    sandbox, name = sandbox_name(run_id), agent_name(run_id)
    rec.update(st.with_fields, sandbox_name=sandbox, agent_name=name, runtime=runtime)
    started = time.monotonic()
    try:
        workspace = copy_workspace(layout, run_id)
        request = ProvisionRequest(
            name=sandbox,
            description=DESCRIPTION.format(run_id=run_id),
            workspace=workspace,
            rest_url=target.rest_url,
            ws_url=target.ws_url,
            agent_name=name,
            kit=str(KIT_SPEC_DIR) if runtime == "sbx" else None,
            image=image if runtime == "docker" else None,
            env=dict(agent_env or {}),
        )
        result = commands.run(
            request,
            runtime=runtime,
            run_dir=layout.kit_dir,
            api_key=target.user_key,
            log=lambda line: rec.log(_redact(line, target)),
            wait_s=0,
        )
    except (ProvisionError, SandboxError, OSError) as exc:
        agent_id = registered_agent(layout, sandbox, target.user_key)
        if agent_id:
            rec.update(st.with_fields, agent_id=agent_id)
        why = _redact(f"provisioning failed: {exc}", target)
        raise fail(rec, Label.PROVISION, "", why) from None
    rec.update(st.with_fields, agent_id=result.agent_id)
    try:
        room = run_async(lambda: _create_room(target, room_title(run_id)))
    except Exception as exc:
        raise fail(rec, Label.PROVISION, "", f"creating the room failed: {_why(exc)}") from None
    rec.update(st.with_fields, room_id=room)
    try:
        run_async(lambda: _add_member(target, room, result.agent_id))
    except Exception as exc:
        raise fail(rec, Label.PROVISION, "", f"adding the agent to the room: {_why(exc)}") from None
    rt = runtime_for(layout, runtime)
    try:
        agent_check.wait_online(
            api_key=target.user_key,
            rest_url=target.rest_url,
            room_id=room,
            agent_id=result.agent_id,
            timeout_s=online_timeout_s,
            alive=lambda: rt.status(sandbox) is SandboxStatus.RUNNING,
        )
    except agent_check.AgentCheckError as exc:
        tail = commands.log_tail(rt, sandbox, [target.user_key])
        raise fail(rec, Label.PROVISION, "", f"{exc}\n{tail}") from None
    seconds = time.monotonic() - started
    passed(
        rec,
        Label.PROVISION,
        "",
        f"{runtime} sandbox {sandbox}, agent {result.agent_id} online in room {room} "
        f"{seconds:.1f}s after provisioning started",
    )
    return seconds


def _why(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}" if status else f"{type(exc).__name__}: {exc}"


def _redact(text: str, target: Target) -> str:
    return text.replace(target.user_key, "***") if target.user_key else text


def probe(
    rec: Recorder, target: Target, label: Label, *, timeout_s: float = REPLY_TIMEOUT_S
) -> Ack:
    """One round trip recorded under `label`; ProbeFailed (after recording) on failure."""
    state = rec.state
    if not (state.agent_id and state.room_id):
        raise fail(rec, label, "", "the run has no agent and room; run the provision probe first")
    try:
        ack = run_async(
            lambda: round_trip(
                target, state.room_id, state.agent_id, state.agent_name, timeout_s=timeout_s
            )
        )
    except TimeoutError as exc:
        raise fail(rec, label, "", f"agent {state.agent_id}: {exc}") from None
    except Exception as exc:
        raise fail(rec, label, "", f"the round trip failed: {_why(exc)}") from None
    passed(rec, label, ack.token, ack.describe("reply"))
    return ack


# ---------------------------------------------------------------- cleanup


@dataclass
class CleanupReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


def _reap_room(rec: Recorder, target: Target, room: str, report: CleanupReport) -> None:
    try:
        gone_now = delete_room(api_key=target.user_key, rest_url=target.rest_url, room_id=room)
    except RoomError as exc:
        report.problems.append(f"room {room}: {exc}")
        return
    rec.update(st.mark_reaped, ReapKind.ROOM, room)
    report.lines.append(f"room {room} {'deleted' if gone_now else 'already gone'}")


def _reap_agent(rec: Recorder, target: Target, agent_id: str, report: CleanupReport) -> None:
    try:
        run_async(
            lambda: delete_agent(
                api_key=target.user_key, rest_url=target.rest_url, agent_id=agent_id
            )
        )
    except Exception as exc:
        report.problems.append(f"agent {agent_id}: {_why(exc)}")
        return
    rec.update(st.mark_reaped, ReapKind.AGENT, agent_id)
    report.lines.append(f"agent {agent_id} deleted")


def unprovision_sandbox(
    layout: Layout, target: Target, sandbox: str, report: CleanupReport
) -> None:
    """Remove what the kit recorded for `sandbox` (sandbox, key, agent, manifest)."""
    if not layout.manifest(sandbox).exists():
        return
    try:
        removed = commands.unprovision(sandbox, run_dir=layout.kit_dir, api_key=target.user_key)
    except BandkitError as exc:
        report.problems.append(_redact(f"sandbox {sandbox}: {exc}", target))
        return
    if removed.clean:
        report.lines.append(f"sandbox {sandbox} unprovisioned (sandbox, key, agent, manifest)")
    else:
        lines = "; ".join(removed.lines())
        report.problems.append(_redact(f"sandbox {sandbox}: {lines}", target))


def cleanup_for_reprovision(rec: Recorder, layout: Layout, target: Target) -> CleanupReport:
    """Reap the run's current room, sandbox and agent (no probe recorded): the daemon
    drill's recovery when the agent did not survive, before it provisions anew."""
    report = CleanupReport()
    state = rec.state
    if state.room_id:
        _reap_room(rec, target, state.room_id, report)
    if state.sandbox_name:
        unprovision_sandbox(layout, target, state.sandbox_name, report)
    if state.agent_id:
        _reap_agent(rec, target, state.agent_id, report)
    return report


def cleanup(rec: Recorder, layout: Layout, target: Target) -> CleanupReport:
    """Reap the run's room and agent and anything carried over; record the cleanup probe."""
    report = CleanupReport()
    state = rec.state
    rooms = {state.room_id} | {u.id for u in state.unreaped if u.kind is ReapKind.ROOM}
    title = room_title(state.run_id)
    try:  # a room made by a run that stopped before it learned the id
        rooms |= set(
            run_async(
                lambda: find_rooms_by_title(
                    api_key=target.user_key, rest_url=target.rest_url, title=title
                )
            )
        )
    except Exception as exc:
        report.problems.append(f"listing rooms titled {title!r}: {_why(exc)}")
    for room in sorted(r for r in rooms if r):
        _reap_room(rec, target, room, report)
    sandboxes = sorted({state.sandbox_name, *_recorded_sandboxes(layout)} - {""})
    for sandbox in sandboxes:
        unprovision_sandbox(layout, target, sandbox, report)
    agents = {state.agent_id} | {u.id for u in rec.state.unreaped if u.kind is ReapKind.AGENT}
    for agent_id in sorted(a for a in agents if a):
        _reap_agent(rec, target, agent_id, report)  # already gone with the sandbox: a 404 is ok
    workspace = layout.workspace(state.run_id)
    if workspace.exists():
        shutil.rmtree(workspace, ignore_errors=True)
        report.lines.append("workspace copy removed")
    detail = "; ".join(report.lines + report.problems) or "nothing to reap"
    if report.clean:
        passed(rec, Label.CLEANUP, "", detail)
    else:
        rec.update(st.record_probe, Label.CLEANUP, "", False, detail)
        rec.log(f"probe cleanup: FAIL: {detail}")
    return report


def _recorded_sandboxes(layout: Layout) -> list[str]:
    """Smoke sandboxes with a provisioning manifest left (an earlier run that crashed)."""
    root = layout.kit_dir / "provision"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.name.startswith("smoke-"))
