"""Room tasks and the room goal: validation, mutation and rendering (routes: `rest_tasks`).

Same contract as `ops.py` (state and `now` in, `ApiFailure` for refusals, no IO); the
rules are listed in `rest_tasks`. Every change appends a `TaskEvent` with explicit
`from`/`to` per field.
"""

from __future__ import annotations

import re
from typing import Any

from bandkit.emulator import ops, wire
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import (
    Actor,
    Board,
    EmulatorState,
    ParticipantType,
    Room,
    Task,
    TaskAssignment,
    TaskEvent,
)

STATES = ("active", "cancelled", "superseded", "archived")
STATUSES = ("pending", "in_progress", "blocked", "in_review", "failed", "completed")
# overall status: the first of these any assignee has, else completed / pending
OVERALL_ORDER = ("failed", "blocked", "in_progress", "in_review", "pending")
MAX_TASKS_PER_ROOM = 500
MAX_EVENTS = 1000
MAX_SUBJECT = 500
MAX_TEXT = 10_000
HISTORY_EMBED = 100
_NUMBER = re.compile(r"^[0-9]{1,9}$")
WORK_FIELDS = ("status", "active_form", "linked_native_id", "comment", "subject", "detail")


def _agent(agent_id: str) -> Actor:
    return Actor(id=agent_id, type=ParticipantType.AGENT)


def actor(state: EmulatorState, a: Actor) -> dict[str, Any]:
    """`TaskActor`: a deleted agent keeps its id under a placeholder name."""
    if a.type is ParticipantType.USER:
        name = wire.user_name(state.user)
        return {"id": a.id, "name": name, "handle": state.user.handle, "type": "User"}
    agent = state.agents.get(a.id)
    name, handle = (agent.name, agent.handle) if agent else ("deleted agent", None)
    return {"id": a.id, "name": name, "handle": handle, "type": "Agent"}


def event(state: EmulatorState, e: TaskEvent) -> dict[str, Any]:
    return {"actor": actor(state, e.actor), "at": e.at, "event": e.event, "payload": e.payload}


def _overall(task: Task) -> str:
    statuses = {a.status for a in task.assignments}
    if not statuses:
        return "pending"
    if statuses == {"completed"}:
        return "completed"
    return next(s for s in OVERALL_ORDER if s in statuses)


def render(state: EmulatorState, task: Task, *, history: bool) -> dict[str, Any]:
    """`Task`; with `history`, the latest `HISTORY_EMBED` events, oldest first."""
    out: dict[str, Any] = {
        "id": task.id,
        "number": task.number,
        "chat_room_id": task.room_id,
        "subject": task.subject,
        "detail": task.detail,
        "state": task.state,
        "overall_status": _overall(task),
        "created_by": actor(state, task.created_by),
        "assignments": [
            {
                "assignee": actor(state, a.assignee),
                "status": a.status,
                "active_form": a.active_form,
                "linked_native_id": a.linked_native_id,
                "updated_at": a.updated_at,
            }
            for a in task.assignments
        ],
        "superseded_by_id": task.superseded_by_id,
        "inserted_at": task.inserted_at,
        "updated_at": task.updated_at,
    }
    if history:
        out["history"] = [event(state, e) for e in task.history[-HISTORY_EMBED:]]
        out["history_truncated"] = len(task.history) > HISTORY_EMBED
    return out


def _text(fields: dict[str, Any], key: str, limit: int, *, blank_ok: bool) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"/{key}", "must be a string")
    if not blank_ok and not value.strip():
        raise invalid(f"/{key}", "can't be blank")
    if len(value) > limit:
        raise invalid(f"/{key}", f"should be at most {limit} character(s)")
    return value


def _log(
    history: list[TaskEvent], who: Actor, kind: str, payload: dict[str, Any], now: str
) -> None:
    if len(history) >= MAX_EVENTS:
        raise invalid("/", f"the history is full ({MAX_EVENTS} events); create a new task")
    history.append(TaskEvent(actor=who, at=now, event=kind, payload=payload))


def find(state: EmulatorState, room_id: str, ref: str) -> Task:
    """A room's task by UUID or board number (`3`, not `#3`: the SDK strips the `#`)."""
    tasks = state.tasks.get(room_id, {})
    if ref in tasks:
        return tasks[ref]
    if _NUMBER.match(ref):
        for task in tasks.values():
            if task.number == int(ref):
                return task
    raise not_found("task")


def create(
    state: EmulatorState, room: Room, agent_id: str, fields: dict[str, Any], now: str
) -> Task:
    subject = _text(fields, "subject", MAX_SUBJECT, blank_ok=False)
    if subject is None:
        raise invalid("/subject", "can't be blank")
    detail = _text(fields, "detail", MAX_TEXT, blank_ok=True) or ""
    tasks = state.tasks.setdefault(room.id, {})
    if len(tasks) >= MAX_TASKS_PER_ROOM:
        raise invalid("/", f"a room holds at most {MAX_TASKS_PER_ROOM} tasks")
    old = None
    supersedes = fields.get("supersedes_id")
    if supersedes is not None:
        try:
            old = find(state, room.id, str(supersedes))
        except ApiFailure:
            old = None
        if old is None or old.state != "active":
            raise invalid("/supersedes_id", "does not name an active task in this room")
    who = _agent(agent_id)
    task = Task(
        id=ops.new_uuid(),
        number=max((t.number for t in tasks.values()), default=0) + 1,
        room_id=room.id,
        subject=subject,
        detail=detail,
        created_by=who,
        inserted_at=now,
        updated_at=now,
    )
    _log(task.history, who, "created", {"subject": subject, "detail": detail}, now)
    if old is not None:
        _log(old.history, who, "superseded", {"by": task.id, "by_number": task.number}, now)
        old.state, old.superseded_by_id, old.updated_at = "superseded", task.id, now
    tasks[task.id] = task
    return task


def _assignment(task: Task, agent_id: str) -> TaskAssignment | None:
    return next((a for a in task.assignments if a.assignee.id == agent_id), None)


def _state_change(fields: dict[str, Any]) -> str | None:
    state = fields.get("state")
    if state is not None and state not in ("cancelled", "archived", "active"):
        raise invalid("/state", "must be one of cancelled, archived, active")
    return state


def update(
    state: EmulatorState, task: Task, agent_id: str, fields: dict[str, Any], now: str
) -> None:
    """Apply one update (see `rest_tasks` for the order); all checks run before any change."""
    target = _state_change(fields)
    status = fields.get("status")
    if status is not None and status not in STATUSES:
        raise invalid("/status", f"must be one of {', '.join(STATUSES)}")
    texts = {
        "subject": _text(fields, "subject", MAX_SUBJECT, blank_ok=False),
        "detail": _text(fields, "detail", MAX_TEXT, blank_ok=True),
        "comment": _text(fields, "comment", MAX_TEXT, blank_ok=False),
        "active_form": _text(fields, "active_form", MAX_SUBJECT, blank_ok=True),
        "linked_native_id": _text(fields, "linked_native_id", MAX_SUBJECT, blank_ok=True),
    }
    work = status is not None or any(v is not None for v in texts.values())
    if not work and target is None:
        raise invalid(
            "/",
            "send at least one of state, status, active_form, comment, "
            "subject, detail, linked_native_id",
        )
    effective = "active" if target == "active" and task.state == "archived" else task.state
    if target == "active" and task.state != "archived" and task.state != "active":
        raise invalid("/state", f"only an archived task can be restored, this one is {task.state}")
    if work and effective != "active":
        raise invalid("/state", f"the task is {task.state}; work fields need an active task")
    if target == "cancelled" and effective != "active":
        raise invalid("/state", f"only an active task can be cancelled, this one is {task.state}")
    mine = _assignment(task, agent_id)
    joins = (texts["active_form"], texts["linked_native_id"])
    if mine is None and status is None and any(v is not None for v in joins):
        raise invalid("/status", "send your status first: it joins you to the task")
    projected = len(task.history) + 3 + sum(1 for v in texts.values() if v is not None)
    if projected > MAX_EVENTS:
        raise invalid("/", f"the history is full ({MAX_EVENTS} events); create a new task")
    who = _agent(agent_id)
    if target == "active" and task.state == "archived":
        task.state = "active"
        _log(task.history, who, "unarchived", {"from": "archived", "to": "active"}, now)
    edits = {
        k: {"from": getattr(task, k), "to": texts[k]}
        for k in ("subject", "detail")
        if texts[k] is not None and texts[k] != getattr(task, k)
    }
    if edits:
        for k, change in edits.items():
            setattr(task, k, change["to"])
        _log(task.history, who, "edited", edits, now)
    if status is not None or (mine is not None and any(v is not None for v in joins)):
        if mine is None:
            mine = TaskAssignment(assignee=who, status=str(status), updated_at=now)
            task.assignments.append(mine)
            _log(task.history, who, "status_changed", {"from": None, "to": status}, now)
        elif status is not None and status != mine.status:
            _log(task.history, who, "status_changed", {"from": mine.status, "to": status}, now)
            mine.status = str(status)
        if texts["active_form"] is not None:
            mine.active_form = texts["active_form"]
        if texts["linked_native_id"] is not None:
            mine.linked_native_id = texts["linked_native_id"]
        mine.updated_at = now
    if texts["comment"] is not None:
        _log(task.history, who, "commented", {"comment": texts["comment"]}, now)
    if target in ("cancelled", "archived") and task.state != target:
        _log(task.history, who, target, {"from": task.state, "to": target}, now)
        task.state = target
    task.updated_at = now


def render_board(state: EmulatorState, room_id: str, *, history: bool) -> dict[str, Any]:
    """`Board`: an empty default (no goal yet) until someone sets one."""
    board = state.boards.get(room_id) or Board()
    out: dict[str, Any] = {
        "chat_room_id": room_id,
        "goal_title": board.goal_title,
        "goal_summary": board.goal_summary,
        "created_by": actor(state, board.created_by) if board.created_by else None,
        "updated_by": actor(state, board.updated_by) if board.updated_by else None,
        "inserted_at": board.inserted_at,
        "updated_at": board.updated_at,
    }
    if history:
        out["history"] = [event(state, e) for e in board.history[-HISTORY_EMBED:]]
        out["history_truncated"] = len(board.history) > HISTORY_EMBED
    return out


def set_goal(
    state: EmulatorState, room_id: str, agent_id: str, fields: dict[str, Any], now: str
) -> None:
    title = _text(fields, "goal_title", MAX_SUBJECT, blank_ok=False)
    summary = _text(fields, "goal_summary", MAX_TEXT, blank_ok=True)
    if title is None and summary is None:
        raise invalid("/", "send goal_title and/or goal_summary")
    board = state.boards.get(room_id) or Board()
    changes = {
        k: {"from": getattr(board, k), "to": v}
        for k, v in (("goal_title", title), ("goal_summary", summary))
        if v is not None and v != getattr(board, k)
    }
    if not changes:
        return
    who = _agent(agent_id)
    first = board.created_by is None
    _log(board.history, who, "goal_set" if first else "goal_edited", changes, now)
    for k, change in changes.items():
        setattr(board, k, change["to"])
    if first:
        board.created_by, board.inserted_at = who, now
    board.updated_by, board.updated_at = who, now
    state.boards[room_id] = board
