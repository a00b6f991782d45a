"""The control API under `/_emulator/` (user key): health, redacted state, faults, agent control.

- `GET health`: liveness and counts (no secrets), the platform's identity (`platform_id`,
  made once with its state) and where that state is kept (`state_file`, null when in
  memory only): what records name it by, and how a teardown tells a platform that may
  come back from one whose state is gone.
- `GET state`: the whole state without any key digest.
- `POST login-link[?next=/rooms/<id>]`: a fresh one-time login link for the room pages
  (`access.py`), landing on `next` when given (`/` or one room's page; anything else is
  400); the user key is the only way to get one, and the link is never logged.
- `POST faults/drop`: abort every WebSocket with no close frame (a network cut).
- `POST faults/pause?seconds=N`: for N seconds agents get nothing: the agent API and
  every socket (replies, pushes, new upgrades) are held; the human and control APIs
  keep answering, so a drill can post a message during the pause.
- `POST agents/{id}/control`: push `agent.control` (interrupt/stop/play) to an agent;
  `stop` also makes lifecycle calls in that room answer 204 until `play`.
A restart is a real process restart with `--state-file`, so there is no restart fault.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops, wire
from bandkit.emulator.access import landing
from bandkit.emulator.api import body, data, endpoint
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import invalid, not_found

control = endpoint(Kind.USER)
MAX_PAUSE_S = 3600.0


@control
async def health(request: Request, platform: Platform, _: Principal) -> Response:
    state = platform.state
    return data(
        {
            "status": "paused" if not platform.gate.is_set() else "ok",
            "agents": len(state.agents),
            "rooms": len(state.rooms),
            "messages": len(state.messages),
            "sockets": len(platform.broker.sockets),
            "page_feeds": platform.pages.open_feeds,
            "online_agents": sorted(platform.broker.agent_sockets),
            "unhandled": platform.unhandled,
            "platform_id": state.platform_id,
            "state_file": str(platform.saver.path.absolute()) if platform.saver else None,
        }
    )


@control
async def snapshot(request: Request, platform: Platform, _: Principal) -> Response:
    return data(wire.redacted(platform.state))


@control
async def login_link(request: Request, platform: Platform, _: Principal) -> Response:
    base = str(request.base_url).rstrip("/")
    asked = request.query_params.get("next")
    lands = landing(asked)
    if asked is not None and lands is None:
        raise invalid("/next", "must be / or /rooms/<room id> (a page of this emulator)")
    token = platform.pages.mint_login_token()
    target = "" if lands is None else f"&next={quote(lands, safe='/')}"
    return data(
        {
            "url": f"{base}/login#token={token}{target}",
            "expires_in": int(platform.pages.login_ttl),
        },
        status=201,
    )


@control
async def drop(request: Request, platform: Platform, _: Principal) -> Response:
    return data({"dropped": platform.drop_sockets()})


@control
async def pause(request: Request, platform: Platform, _: Principal) -> Response:
    raw = request.query_params.get("seconds", "")
    if raw == "until-resumed":  # deterministic drills: held until faults/resume
        platform.pause(None)
        return data({"paused_for": None})
    try:
        seconds = float(raw)
    except ValueError:
        raise invalid("/seconds", "is required and must be a number") from None
    if not 0 < seconds <= MAX_PAUSE_S:
        raise invalid("/seconds", f"must be > 0 and <= {MAX_PAUSE_S:.0f}")
    platform.pause(seconds)
    return data({"paused_for": seconds})


@control
async def resume(request: Request, platform: Platform, _: Principal) -> Response:
    platform.resume()
    return data({"resumed": True})


@control
async def agent_control(request: Request, platform: Platform, _: Principal) -> Response:
    agent_id = request.path_params["agent_id"]
    if agent_id not in platform.state.agents:
        raise not_found("agent")
    fields = await body(request)
    mode = fields.get("mode")
    if mode not in ("interrupt", "stop", "play"):
        raise invalid("/mode", "must be interrupt, stop or play")
    room_id = fields.get("room_id")
    if room_id is not None:
        ops.room_for_agent(platform.state, str(room_id), agent_id)
    rooms = (
        [str(room_id)]
        if room_id is not None
        else [r.id for r in platform.state.rooms.values() if agent_id in r.participants]
    )
    for rid in rooms:
        if mode == "stop":
            platform.stopped.add((agent_id, rid))
        elif mode == "play":
            platform.stopped.discard((agent_id, rid))
    payload = wire.agent_control(mode, agent_id, None if room_id is None else str(room_id))
    topic = ops.agent_control_topic(agent_id)
    platform.broker.publish([ops.Push(topic, "agent.control", payload, users=False)])
    return data(payload)


PREFIX = "/_emulator"
ROUTES = [
    Route(f"{PREFIX}/health", health, methods=["GET"]),
    Route(f"{PREFIX}/state", snapshot, methods=["GET"]),
    Route(f"{PREFIX}/login-link", login_link, methods=["POST"]),
    Route(f"{PREFIX}/faults/drop", drop, methods=["POST"]),
    Route(f"{PREFIX}/faults/pause", pause, methods=["POST"]),
    Route(f"{PREFIX}/faults/resume", resume, methods=["POST"]),
    Route(f"{PREFIX}/agents/{{agent_id}}/control", agent_control, methods=["POST"]),
]
