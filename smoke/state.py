"""The smoke run's state: what was provisioned, which probes ran, what the operator saw.

`SmokeState` is frozen; every function returns a new state and takes the time as `now`.
`StateStore` keeps the current run in `<root>/state.json` (0600, directory 0700, atomic
writes that never follow a planted link) and archives old runs as `state.<run_id>.json`.
Unknown fields are refused, so no key can be stored by accident. A platform id is live
(`agent_id`/`room_id`), in `unreaped`, or forgotten by `mark_reaped`; rotation carries the
first two over to the next run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, ValidationError

from bandkit.errors import BandkitError
from bandkit.fsio import PRIVATE_DIR_MODE, read_regular, write_private

STALE_AFTER = timedelta(hours=12)
FREE_KEY_RE = re.compile(r"[a-z][a-z0-9_-]{0,40}")
SECRETISH_RE = re.compile(r"key|token|secret|password|credential")


class StateError(BandkitError):
    """The smoke state cannot be read, written or changed as asked; the message says why."""


class Phase(StrEnum):
    STARTED = "started"
    AWAITING_WIFI_RECOVERY = "awaiting-wifi-recovery"
    AWAITING_SLEEP_WAKE = "awaiting-sleep-wake"
    DAEMON_RESTART = "daemon-restart"
    COMPLETED = "completed"
    FAILED = "failed"


class Label(StrEnum):
    PROVISION = "provision"
    INITIAL = "initial"
    AFTER_WIFI_RECONNECT = "after-wifi-reconnect"
    AFTER_SLEEP_WAKE = "after-sleep-wake"
    AFTER_DAEMON_RESTART = "after-daemon-restart"
    AFTER_PLATFORM_RESTART = "after-platform-restart"  # automated drill; not a scorecard row
    CLEANUP = "cleanup"


class ObservationKey(StrEnum):
    NETWORK_CUT = "network_cut"
    SLEEP_WAKE = "sleep_wake"
    DAEMON_RESTART = "daemon_restart"
    PLATFORM_RESTART = "platform_restart"


class ReapKind(StrEnum):
    AGENT = "agent"
    ROOM = "room"


TERMINAL = frozenset({Phase.COMPLETED, Phase.FAILED})
_ORDER = list(Phase)[:5]  # the declaration order above: started ... completed
FORWARD: dict[Phase, Phase] = dict(pairwise(_ORDER))
OPERATOR_MESSAGES: dict[Phase, str] = {
    Phase.STARTED: "Provision the run's agent and room, then run the initial probe.",
    Phase.AWAITING_WIFI_RECOVERY: "Cut the host's network (Wi-Fi off or cable out) for at "
    "least 30 seconds, restore it, then run the after-wifi-reconnect probe and record the "
    "network_cut observation.",
    Phase.AWAITING_SLEEP_WAKE: "Put the host to sleep for at least one minute, wake it, then "
    "run the after-sleep-wake probe and record the sleep_wake observation.",
    Phase.DAEMON_RESTART: "Restart the sandbox daemon, re-provision if the agent died with "
    "it, then run the after-daemon-restart probe and record the daemon_restart observation.",
    Phase.COMPLETED: "The run is complete: read the evidence report; remove the sandbox and "
    "its workspace by hand when you no longer need them.",
    Phase.FAILED: "The run failed: read the evidence report's Follow-up section, reap what "
    "is left with the cleanup probe, then start a fresh run.",
}


def check_messages(messages: Mapping[Phase, str]) -> None:
    """Raise StateError unless every phase has exactly one non-empty operator message."""
    bad = {*Phase} ^ {phase for phase, text in messages.items() if text.strip()}
    if bad:
        raise StateError(f"operator messages missing or unknown: {sorted(map(str, bad))}")


check_messages(OPERATOR_MESSAGES)


def check_observation_key(key: str) -> str:
    """A known ObservationKey, or a free key `[a-z][a-z0-9_-]{0,40}` that names no secret."""
    known = key in set(ObservationKey)
    if not known and (not FREE_KEY_RE.fullmatch(key) or SECRETISH_RE.search(key)):
        raise ValueError(f"observation key {key!r} must be [a-z][a-z0-9_-]{{0,40}}, no secret name")
    return key


UtcDatetime = Annotated[AwareDatetime, AfterValidator(lambda v: v.astimezone(UTC))]
RunId = Annotated[str, pydantic.StringConstraints(pattern=r"^[0-9a-f]{8}$")]
ObservationName = Annotated[str, AfterValidator(check_observation_key)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Probe(_Frozen):  # one attempt; a retry appends another with the same label
    label: Label
    marker: str
    passed: bool
    detail: str
    at: UtcDatetime


class Transition(_Frozen):  # the run entered `phase` at `at`
    phase: Phase
    at: UtcDatetime


class Unreaped(_Frozen):  # a platform agent or room not removed yet
    kind: ReapKind
    id: str


class SmokeState(_Frozen):
    run_id: RunId
    phase: Phase = Phase.STARTED
    sandbox_name: str = ""
    sbx_version: str = ""
    sdk_version: str = ""
    runtime: str = ""
    room_id: str = ""
    agent_id: str = ""
    agent_name: str = ""
    probes: list[Probe] = []
    transitions: list[Transition] = []
    observations: dict[ObservationName, str] = {}
    unreaped: list[Unreaped] = []
    started_at: UtcDatetime
    updated_at: UtcDatetime


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'state'}: {err['msg']}"


def _validated(what: str, data: dict[str, Any]) -> SmokeState:
    try:
        return SmokeState.model_validate(data)
    except ValidationError as exc:
        raise StateError(f"{what}: {_first_error(exc)}") from None


def _replace(state: SmokeState, now: datetime, **changes: Any) -> SmokeState:
    return _validated(f"run {state.run_id}", {**state.model_dump(), **changes, "updated_at": now})


def new_state(run_id: str, *, now: datetime, unreaped: list[Unreaped] | None = None) -> SmokeState:
    """A fresh run in phase `started`."""
    started = [{"phase": Phase.STARTED, "at": now}]
    data = {"run_id": run_id, "started_at": now, "updated_at": now, "transitions": started}
    return _validated("cannot start a run", {**data, "unreaped": list(unreaped or [])})


def advance(state: SmokeState, phase: Phase, *, now: datetime) -> SmokeState:
    """Move one documented step forward, or to `failed` from any non-terminal phase."""
    if state.phase in TERMINAL or phase not in (Phase.FAILED, FORWARD[state.phase]):
        nxt = "none (terminal)" if state.phase in TERMINAL else f"{FORWARD[state.phase]}, failed"
        raise StateError(f"run {state.run_id} cannot move from {state.phase} to {phase} ({nxt})")
    moves = [*state.transitions, Transition(phase=phase, at=now)]
    return _replace(state, now, phase=phase, transitions=moves)


def record_probe(
    state: SmokeState, label: Label, marker: str, passed: bool, detail: str, *, now: datetime
) -> SmokeState:
    """Append one probe attempt (a retry appends again). A finished run takes only cleanup."""
    if state.phase in TERMINAL and label != Label.CLEANUP:
        raise StateError(f"run {state.run_id} is {state.phase}; start a fresh run to probe")
    probe = {"label": label, "marker": marker, "passed": passed, "detail": detail, "at": now}
    return _replace(state, now, probes=[*state.probes, probe])


def record_observation(state: SmokeState, key: str, text: str, *, now: datetime) -> SmokeState:
    """Set the operator's note for `key` (a later note for the same key replaces it)."""
    return _replace(state, now, observations={**state.observations, key: text})


PLAIN_FIELDS = frozenset({"sandbox_name", "sbx_version", "sdk_version", "runtime", "agent_name"})
LIVE_IDS = {"agent_id": ReapKind.AGENT, "room_id": ReapKind.ROOM}


def with_fields(state: SmokeState, *, now: datetime, **fields: str) -> SmokeState:
    """Set plain text fields and live ids; a replaced live id moves to `unreaped`."""
    unknown = sorted(set(fields) - PLAIN_FIELDS - set(LIVE_IDS))
    if unknown:
        raise StateError(f"not a settable smoke state field: {', '.join(unknown)}")
    unreaped = list(state.unreaped)
    for name, kind in LIVE_IDS.items():
        old = Unreaped(kind=kind, id=str(getattr(state, name)))
        if name in fields and old.id and fields[name] != old.id and old not in unreaped:
            unreaped.append(old)
    return _replace(state, now, **fields, unreaped=unreaped)


def mark_reaped(state: SmokeState, kind: ReapKind, id_: str, *, now: datetime) -> SmokeState:
    """Forget an id once it is gone from the platform (from `unreaped` and the live ids)."""
    kept = [u for u in state.unreaped if (u.kind, u.id) != (kind, id_)]
    live = {n: "" for n, k in LIVE_IDS.items() if k == kind and getattr(state, n) == id_}
    return _replace(state, now, unreaped=kept, **live)


def latest_probes(state: SmokeState) -> dict[Label, Probe]:
    """The latest attempt per label, in the order attempts were recorded (not by clock)."""
    return {probe.label: probe for probe in state.probes}


def carried_over(state: SmokeState) -> list[Unreaped]:
    """Ids a new run must still reap: `unreaped` plus live ids never marked reaped."""
    live = [Unreaped(kind=k, id=getattr(state, n)) for n, k in LIVE_IDS.items()]
    return [*state.unreaped, *(u for u in live if u.id and u not in state.unreaped)]


class StateStore:
    """`<root>/state.json` for the current run, `state.<run_id>.json` for archived ones."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.state_path = self.root / "state.json"
        self.evidence_path = self.root / "evidence.md"

    def archive_path(self, run_id: str) -> Path:
        return self.root / f"state.{run_id}.json"

    def load(self) -> SmokeState | None:
        """The current run, or None when there is none. A bad file is reported, never touched."""
        try:
            raw, _mode = read_regular(self.state_path, what="smoke state")
            return SmokeState.model_validate(json.loads(raw.decode("utf-8")))
        except FileNotFoundError:
            return None
        except (BandkitError, OSError, ValueError) as exc:
            why = _first_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise StateError(
                f"{self.state_path} is not a smoke state this kit wrote ({why}); "
                "move it away (it was left as it is) and start again"
            ) from None

    def _write(self, path: Path, text: str) -> Path:
        if self.root.is_symlink():
            raise StateError(f"{self.root} is a symbolic link; make it a plain directory")
        self.root.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(self.root, PRIVATE_DIR_MODE)
        write_private(path, text)
        return path

    def save(self, state: SmokeState) -> Path:
        return self._write(self.state_path, state.model_dump_json(indent=2) + "\n")

    def archive(self, state: SmokeState) -> Path:
        """Write `state.<run_id>.json`; state.json is left for the caller to replace."""
        return self._write(self.archive_path(state.run_id), state.model_dump_json(indent=2) + "\n")

    def write_evidence(self, text: str) -> Path:
        return self._write(self.evidence_path, text)

    def begin(
        self,
        now: datetime,
        *,
        stale_after: timedelta = STALE_AFTER,
        token: Callable[[int], str] = secrets.token_hex,
    ) -> SmokeState:
        """Resume a live run updated within `stale_after`; else archive it, start and save anew."""
        if now.utcoffset() is None:
            raise StateError("begin needs a timezone-aware time")
        current = self.load()
        if current is not None:
            if current.phase not in TERMINAL and now - current.updated_at < stale_after:
                return current
            self.archive(current)
        carry = carried_over(current) if current else []
        state = new_state(self._fresh_id(token), now=now, unreaped=carry)
        self.save(state)
        return state

    def _fresh_id(self, token: Callable[[int], str]) -> str:
        for run_id in (token(4) for _ in range(16)):
            if not self.archive_path(run_id).exists():  # the old run's archive exists by now
                return run_id
        raise StateError(f"could not pick an unused run id under {self.root}")
