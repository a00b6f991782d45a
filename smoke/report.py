"""The smoke's verdict and its evidence report (Markdown), both derived from the state.

The verdict comes from the latest attempt of the four requirement probes, never from the
phase alone: FAIL when the run is `failed` or any of those latest attempts failed,
INCOMPLETE when any is missing, PASS otherwise. `render` is pure: the time comes in as
`now`, and every free-text value is escaped for the table cell or list item it lands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from smoke.state import (
    TERMINAL,
    Label,
    ObservationKey,
    Phase,
    Probe,
    SmokeState,
    latest_probes,
)


class Verdict(StrEnum):
    PASS = "PASS"  # noqa: S105 (a verdict, not a password)
    FAIL = "FAIL"
    INCOMPLETE = "INCOMPLETE"


@dataclass(frozen=True)
class Requirement:
    """One scorecard row: the probe label that proves it and what to do when it does not."""

    name: str
    label: Label
    if_failed: str
    if_not_run: str


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(
        "Initial round trip",
        Label.INITIAL,
        "check that the agent runs in the sandbox (its log) and can reach the platform, "
        "then retry the initial probe",
        "provision the run, then run the initial probe",
    ),
    Requirement(
        "Network cut",
        Label.AFTER_WIFI_RECONNECT,
        "the agent did not come back after the network returned; note what it logged in "
        "the network_cut observation and retry the after-wifi-reconnect probe",
        "cut and restore the host's network, then run the after-wifi-reconnect probe",
    ),
    Requirement(
        "Sleep/wake",
        Label.AFTER_SLEEP_WAKE,
        "the agent did not recover from the host's sleep; note what it did in the "
        "sleep_wake observation and retry the after-sleep-wake probe",
        "sleep and wake the host, then run the after-sleep-wake probe",
    ),
    Requirement(
        "Daemon restart",
        Label.AFTER_DAEMON_RESTART,
        "the agent did not recover from the daemon restart; re-provision if it died with "
        "the daemon and retry the after-daemon-restart probe",
        "restart the sandbox daemon, then run the after-daemon-restart probe",
    ),
)
OBSERVATION_NAMES: dict[ObservationKey, str] = {
    ObservationKey.NETWORK_CUT: "Network cut",
    ObservationKey.SLEEP_WAKE: "Sleep/wake",
    ObservationKey.DAEMON_RESTART: "Daemon restart",
    ObservationKey.PLATFORM_RESTART: "Platform restart",
}
NOT_RECORDED = "(not recorded)"
UNKNOWN = "(unknown)"


def verdict(state: SmokeState) -> Verdict:
    latest = latest_probes(state)
    probes = [latest.get(req.label) for req in REQUIREMENTS]
    if state.phase == Phase.FAILED or any(p is not None and not p.passed for p in probes):
        return Verdict.FAIL
    if any(p is None for p in probes):
        return Verdict.INCOMPLETE
    return Verdict.PASS


def row_status(probe: Probe | None) -> str:
    """PASS, FAIL or NOT RUN for one scorecard row's latest attempt."""
    if probe is None:
        return "NOT RUN"
    return "PASS" if probe.passed else "FAIL"


def cell(text: str) -> str:
    """Text safe inside one Markdown table cell: `|` escaped, line breaks as <br>."""
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return "<br>".join(text.splitlines()) if text else "—"


def inline(text: str) -> str:
    """Text safe as one list item: line breaks become spaces (no new blocks)."""
    return " ".join(text.splitlines()).strip()


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(span: timedelta) -> str:
    seconds = max(0, int(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _environment(state: SmokeState, now: datetime) -> list[str]:
    finished = state.phase in TERMINAL
    end = state.updated_at if finished else now
    span = _duration(end - state.started_at) + ("" if finished else " (so far)")
    values = [
        ("Duration", span),
        ("SDK", state.sdk_version),
        ("sbx", state.sbx_version),
        ("Runtime", state.runtime),
        ("Sandbox", state.sandbox_name),
        ("Started", _when(state.started_at)),
        ("Last update", _when(state.updated_at)),
        ("Rendered", _when(now)),
    ]
    return [f"- {name}: {inline(value) or UNKNOWN}" for name, value in values]


def _scorecard(state: SmokeState) -> list[str]:
    latest = latest_probes(state)
    lines = [
        "| Requirement | Status | Evidence | Attempts | Detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for req in REQUIREMENTS:
        probe = latest.get(req.label)
        attempts = sum(1 for p in state.probes if p.label == req.label)
        if probe is None:
            evidence, detail = f"{req.label}: not run", ""
        else:
            evidence, detail = f"{req.label}: marker {probe.marker or '(none)'}", probe.detail
        row = [req.name, row_status(probe), evidence, str(attempts), detail]
        lines.append("| " + " | ".join(cell(value) for value in row) + " |")
    return lines


def _observations(state: SmokeState) -> list[str]:
    lines = []
    for key, name in OBSERVATION_NAMES.items():
        text = inline(state.observations.get(key, ""))
        lines.append(f"- {name} (`{key}`): {text or NOT_RECORDED}")
    for free in sorted(set(state.observations) - set(OBSERVATION_NAMES)):
        lines.append(f"- `{free}`: {inline(state.observations[free]) or NOT_RECORDED}")
    return lines


def _timeline(state: SmokeState) -> list[str]:
    events: list[tuple[datetime, str]] = [(t.at, f"phase → {t.phase}") for t in state.transitions]
    if not state.transitions:
        events.append((state.started_at, "run started"))
    for probe in state.probes:
        result = "PASS" if probe.passed else "FAIL"
        text = f"probe {probe.label}: {result} (marker {probe.marker or '(none)'})"
        events.append((probe.at, f"{text} — {probe.detail}" if probe.detail else text))
    events.sort(key=lambda event: event[0])  # stable: equal times keep their record order
    return [f"- {_when(at)} {inline(text)}" for at, text in events]


def follow_up(state: SmokeState) -> list[str]:
    """What to do next, one item per FAIL or NOT RUN row and per leftover platform id."""
    latest = latest_probes(state)
    items = []
    for req in REQUIREMENTS:
        probe = latest.get(req.label)
        if probe is None:
            items.append(f"{req.name}: not run; {req.if_not_run}.")
        elif not probe.passed:
            items.append(f"{req.name}: FAIL; {req.if_failed}.")
    if state.phase == Phase.FAILED:
        items.append("The run is marked failed: reap with the cleanup probe, then start anew.")
    leftovers = [f"{u.kind} {u.id}" for u in state.unreaped]
    if state.phase in TERMINAL:
        live = [("agent", state.agent_id), ("room", state.room_id)]
        leftovers += [f"{kind} {id_} (still live)" for kind, id_ in live if id_]
    if leftovers:
        items.append(f"Not reaped yet: {', '.join(leftovers)}; the cleanup probe retries them.")
    return [inline(item) for item in items]


def render(state: SmokeState, *, now: datetime) -> str:
    """The evidence report: Result, Environment, scorecard, observations, timeline, follow-up."""
    todo = follow_up(state)
    sections = [
        (f"# Sandbox smoke — {state.run_id}", []),
        ("## Result", [f"{verdict(state)} — phase: {state.phase}"]),
        ("## Environment", _environment(state, now)),
        ("## Requirement scorecard", _scorecard(state)),
        ("## Observed behaviour", _observations(state)),
        ("## Timeline", _timeline(state)),
        ("## Follow-up", [f"- {item}" for item in todo] if todo else ["none"]),
    ]
    blocks = ["\n".join([heading, "", *body]) if body else heading for heading, body in sections]
    return "\n\n".join(blocks) + "\n"
