"""Provisioning a run (probe label `provision`): a fresh sandbox `smoke-<run_id>`, agent
"Sandbox smoke <run_id>" and room "Sandbox smoke — <run_id>", and the names they get.

Each id is saved to the state before the next fallible step: the sandbox and agent names
first, the agent id as soon as the kit registered it (read from the provisioning
manifest when a later step failed), the room id once created; adding the agent to the
room is its own step; then the agent must be online in that room.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from band_rest import ParticipantRequest
from band_rest.human_api_chats.types.create_my_chat_room_request_chat import (
    CreateMyChatRoomRequestChat,
)

from bandkit.kit import agent_check, commands
from bandkit.kit.platform_api import NO_RETRY, client
from bandkit.kit.provision import ProvisionError, ProvisionRequest
from bandkit.manifest import Kind, Manifest, ManifestError
from bandkit.runtimes.base import Runtime, SandboxError, SandboxStatus
from bandkit.runtimes.select import get_runtime
from smoke import state as st
from smoke.context import AGENT_SRC, Layout, Recorder
from smoke.outcome import fail, passed, reason, redact
from smoke.roundtrip import run_async
from smoke.state import Label
from smoke.target import Target

ONLINE_TIMEOUT_S = 120.0  # the first start of a box syncs the agent's venv
KIT_SPEC_DIR = Path(__file__).resolve().parents[1] / "docker" / "band_python_kit"
DESCRIPTION = "The sandbox smoke's deterministic agent (answers marker:<token>), run {run_id}"


def room_title(run_id: str) -> str:
    return f"Sandbox smoke — {run_id}"


def sandbox_name(run_id: str) -> str:
    return f"smoke-{run_id}"


def agent_name(run_id: str) -> str:
    return f"Sandbox smoke {run_id}"


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
            log=lambda line: rec.log(redact(line, target)),
            wait_s=0,
        )
    except (ProvisionError, SandboxError, OSError) as exc:
        agent_id = registered_agent(layout, sandbox, target.user_key)
        if agent_id:
            rec.update(st.with_fields, agent_id=agent_id)
        why = redact(f"provisioning failed: {exc}", target)
        raise fail(rec, Label.PROVISION, "", why) from None
    rec.update(st.with_fields, agent_id=result.agent_id)
    try:
        room = run_async(lambda: _create_room(target, room_title(run_id)))
    except Exception as exc:
        raise fail(rec, Label.PROVISION, "", f"creating the room failed: {reason(exc)}") from None
    rec.update(st.with_fields, room_id=room)
    try:
        run_async(lambda: _add_member(target, room, result.agent_id))
    except Exception as exc:
        raise fail(
            rec, Label.PROVISION, "", f"adding the agent to the room: {reason(exc)}"
        ) from None
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
