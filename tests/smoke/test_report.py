"""Smoke verdict and evidence report: derived from the latest probes, escaped, secret-free."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from smoke import report
from smoke import state as st
from smoke.report import Verdict, render, verdict
from smoke.state import Label, Phase, ReapKind, SmokeState, StateStore

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
RUN = "0a1b2c3d"
REQUIRED = (
    Label.INITIAL,
    Label.AFTER_WIFI_RECONNECT,
    Label.AFTER_SLEEP_WAKE,
    Label.AFTER_DAEMON_RESTART,
)
HEADINGS = [
    f"# Sandbox smoke — {RUN}",
    "## Result",
    "## Environment",
    "## Requirement scorecard",
    "## Observed behaviour",
    "## Timeline",
    "## Follow-up",
]
CANARY = "canary-sk-5d1e0f9a7b3c"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run_with(
    outcomes: dict[Label, bool | None], *, phase: Phase = Phase.DAEMON_RESTART
) -> SmokeState:
    """A run with one probe per given label (None: not run), walked to `phase`."""
    state = st.new_state(RUN, now=T0)
    for i, (label, passed) in enumerate(outcomes.items()):
        if passed is not None:
            state = st.record_probe(state, label, f"m{i}", passed, f"detail {i}", now=at(i + 1))
    if phase is Phase.FAILED:
        return st.advance(state, Phase.FAILED, now=at(10))
    while state.phase is not phase:
        state = st.advance(state, st.FORWARD[state.phase], now=at(10))
    return state


def all_passed(phase: Phase = Phase.COMPLETED) -> SmokeState:
    return run_with(dict.fromkeys(REQUIRED, True), phase=phase)


def section(text: str, heading: str) -> str:
    body = text.split(f"\n{heading}\n", 1)[1]
    return body.split("\n## ", 1)[0].strip()


def table_rows(text: str) -> list[str]:
    return section(text, "## Requirement scorecard").splitlines()[2:]


# --- the verdict ---------------------------------------------------------------------

CASES = [
    ("all passed, completed", dict.fromkeys(REQUIRED, True), Phase.COMPLETED, Verdict.PASS),
    (
        "all passed, before cleanup",
        dict.fromkeys(REQUIRED, True),
        Phase.DAEMON_RESTART,
        Verdict.PASS,
    ),
    ("all passed, phase failed", dict.fromkeys(REQUIRED, True), Phase.FAILED, Verdict.FAIL),
    ("nothing run, completed", {}, Phase.COMPLETED, Verdict.INCOMPLETE),
    ("nothing run, started", {}, Phase.STARTED, Verdict.INCOMPLETE),
    ("nothing run, failed", {}, Phase.FAILED, Verdict.FAIL),
    (
        "daemon restart missing, completed",
        dict.fromkeys(REQUIRED[:3], True),
        Phase.COMPLETED,
        Verdict.INCOMPLETE,
    ),
    (
        "one failed, others missing",
        {Label.INITIAL: True, Label.AFTER_WIFI_RECONNECT: False},
        Phase.AWAITING_SLEEP_WAKE,
        Verdict.FAIL,
    ),
    (
        "provision and cleanup failures do not count",
        {Label.PROVISION: False, **dict.fromkeys(REQUIRED, True), Label.CLEANUP: False},
        Phase.COMPLETED,
        Verdict.PASS,
    ),
    (
        "provision alone is not a requirement",
        {Label.PROVISION: True},
        Phase.STARTED,
        Verdict.INCOMPLETE,
    ),
]


@pytest.mark.parametrize(
    ("outcomes", "phase", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verdict_cases(outcomes: dict[Label, bool | None], phase: Phase, expected: Verdict) -> None:
    assert verdict(run_with(outcomes, phase=phase)) is expected


@pytest.mark.parametrize(
    "phase", [Phase.STARTED, Phase.DAEMON_RESTART, Phase.COMPLETED, Phase.FAILED]
)
@pytest.mark.parametrize("outcomes", list(itertools.product([True, False, None], repeat=4)))
def test_verdict_over_every_combination(outcomes: tuple[bool | None, ...], phase: Phase) -> None:
    expected = (
        Verdict.FAIL
        if phase is Phase.FAILED or False in outcomes
        else Verdict.INCOMPLETE
        if None in outcomes
        else Verdict.PASS
    )
    assert verdict(run_with(dict(zip(REQUIRED, outcomes, strict=True)), phase=phase)) is expected


@pytest.mark.parametrize(
    ("first", "last", "expected"), [(False, True, Verdict.PASS), (True, False, Verdict.FAIL)]
)
def test_verdict_uses_the_latest_attempt(first: bool, last: bool, expected: Verdict) -> None:
    state = all_passed(Phase.DAEMON_RESTART)
    state = st.record_probe(state, Label.AFTER_SLEEP_WAKE, "r1", first, "", now=at(20))
    state = st.record_probe(state, Label.AFTER_SLEEP_WAKE, "r2", last, "", now=at(21))
    assert verdict(state) is expected


# --- the report ----------------------------------------------------------------------


def test_sections_come_in_order_and_the_result_line_is_exact() -> None:
    text = render(all_passed(), now=at(90))
    positions = [text.index(f"{h}\n") for h in HEADINGS]
    assert positions == sorted(positions)
    assert text.startswith(HEADINGS[0] + "\n")
    assert [line for line in text.splitlines() if line.startswith("#")] == HEADINGS
    assert section(text, "## Result") == "PASS — phase: completed"
    assert section(text, "## Follow-up") == "none"


def test_the_scorecard_has_exactly_four_fixed_rows() -> None:
    state = run_with({Label.INITIAL: True, Label.AFTER_WIFI_RECONNECT: False}, phase=Phase.STARTED)
    rows = table_rows(render(state, now=at(30)))
    assert len(rows) == 4
    cells = [[c.strip() for c in UNESCAPED_PIPE.split(row)[1:-1]] for row in rows]
    assert [c[0] for c in cells] == [r.name for r in report.REQUIREMENTS]
    assert [r.label for r in report.REQUIREMENTS] == list(REQUIRED)
    assert [c[1] for c in cells] == ["PASS", "FAIL", "NOT RUN", "NOT RUN"]
    assert cells[0][2] == "initial: marker m0"
    assert cells[1][2] == "after-wifi-reconnect: marker m1"
    assert cells[1][4] == "detail 1"
    assert cells[2][2] == "after-sleep-wake: not run"


def test_cells_escape_pipes_backslashes_and_line_breaks() -> None:
    detail = "timeout | no reply\nline two\r\nback\\|slash"
    state = st.record_probe(
        st.new_state(RUN, now=T0), Label.INITIAL, "a|b", False, detail, now=at(1)
    )
    rows = table_rows(render(state, now=at(2)))
    assert len(rows) == 4  # no line break leaked out of a cell
    first = rows[0]
    assert len(UNESCAPED_PIPE.findall(first)) == 6  # five columns
    assert "timeout \\| no reply<br>line two<br>back\\\\\\|slash" in first
    assert "marker a\\|b" in first
    assert report.cell("") == "—"


def test_observations_show_not_recorded_when_missing() -> None:
    state = st.record_observation(all_passed(), "sleep_wake", "woke\nafter 4s", now=at(30))
    state = st.record_observation(state, "lid-closed", "yes", now=at(31))
    lines = section(render(state, now=at(40)), "## Observed behaviour").splitlines()
    assert lines == [
        "- Network cut (`network_cut`): (not recorded)",
        "- Sleep/wake (`sleep_wake`): woke after 4s",
        "- Daemon restart (`daemon_restart`): (not recorded)",
        "- Platform restart (`platform_restart`): (not recorded)",
        "- `lid-closed`: yes",
    ]


def test_timeline_is_in_time_order_with_phases_and_probes() -> None:
    state = st.new_state(RUN, now=T0)
    state = st.record_probe(state, Label.INITIAL, "m2", True, "late record", now=at(5))
    state = st.advance(state, Phase.AWAITING_WIFI_RECOVERY, now=at(6))
    state = st.record_probe(state, Label.PROVISION, "", True, "early", now=at(1))
    lines = section(render(state, now=at(7)), "## Timeline").splitlines()
    assert lines == [
        "- 2026-03-01T09:00:00Z phase → started",
        "- 2026-03-01T09:01:00Z probe provision: PASS (marker (none)) — early",
        "- 2026-03-01T09:05:00Z probe initial: PASS (marker m2) — late record",
        "- 2026-03-01T09:06:00Z phase → awaiting-wifi-recovery",
    ]


def test_environment_lists_versions_and_duration() -> None:
    state = st.with_fields(
        st.new_state(RUN, now=T0), now=T0, sdk_version="6.0.1", sbx_version="0.47.0"
    )
    env = section(
        render(state, now=T0 + timedelta(hours=1, minutes=2, seconds=3)), "## Environment"
    )
    lines = env.splitlines()
    assert lines[:5] == [
        "- Duration: 1h 02m 03s (so far)",
        "- SDK: 6.0.1",
        "- sbx: 0.47.0",
        "- Runtime: (unknown)",
        "- Sandbox: (unknown)",
    ]
    done = all_passed()  # finished: the duration stops at the last update
    assert "- Duration: 10m 00s\n" in render(done, now=at(500))


def test_follow_up_has_one_item_per_failed_or_missing_row_and_leftovers() -> None:
    state = run_with({Label.INITIAL: True, Label.AFTER_WIFI_RECONNECT: False}, phase=Phase.STARTED)
    state = st.with_fields(state, now=at(20), agent_id="a1", room_id="r1")
    state = st.with_fields(state, now=at(21), agent_id="a2")
    state = st.advance(state, Phase.FAILED, now=at(22))
    items = section(render(state, now=at(23)), "## Follow-up").splitlines()
    assert items[0].startswith("- Network cut: FAIL;")
    assert "after-wifi-reconnect" in items[0]
    assert items[1].startswith("- Sleep/wake: not run;")
    assert items[2].startswith("- Daemon restart: not run;")
    assert items[3].startswith("- The run is marked failed")
    assert items[4] == (
        "- Not reaped yet: agent a1, agent a2 (still live), room r1 (still live); "
        "the cleanup probe retries them."
    )
    assert len(items) == 5


def test_a_clean_pass_after_reaping_needs_no_follow_up() -> None:
    state = st.with_fields(all_passed(Phase.DAEMON_RESTART), now=at(30), agent_id="a1")
    state = st.mark_reaped(state, ReapKind.AGENT, "a1", now=at(31))
    state = st.advance(state, Phase.COMPLETED, now=at(32))
    assert section(render(state, now=at(33)), "## Follow-up") == "none"


def test_render_is_pure() -> None:
    state = all_passed()
    assert render(state, now=at(99)) == render(state, now=at(99))
    assert state == all_passed()


# --- no secret ever reaches a file or the report -------------------------------------


def test_the_canary_in_the_environment_never_reaches_a_file_or_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("BAND_API_KEY", "BAND_API_KEY_USER", "BAND_AGENT_KEY", "SBX_TOKEN"):
        monkeypatch.setenv(name, CANARY)
    store = StateStore(tmp_path / ".sandbox-smoke")
    state = store.begin(T0)
    state = st.with_fields(state, now=at(1), sandbox_name="smk", agent_id="a1", room_id="r1")
    state = st.record_probe(state, Label.PROVISION, "", True, "agent a1", now=at(2))
    for i, label in enumerate(REQUIRED):
        state = st.record_probe(state, label, f"m{i}", i != 1, "ok", now=at(3 + i))
        state = st.record_probe(state, label, f"r{i}", True, "retry", now=at(3.5 + i))
        if state.phase is not Phase.COMPLETED:
            state = st.advance(state, st.FORWARD[state.phase], now=at(4 + i))
        store.save(state)
    for key in ("network_cut", "sleep_wake", "daemon_restart", "platform_restart", "extra"):
        state = st.record_observation(state, key, "seen", now=at(9))
    state = st.mark_reaped(state, ReapKind.AGENT, "a1", now=at(10))
    state = st.record_probe(state, Label.CLEANUP, "", True, "reaped", now=at(10))
    assert st.latest_probes(state)[Label.CLEANUP].passed
    store.save(state)
    text = render(state, now=at(11))
    store.write_evidence(text)
    store.archive(state)
    rotated = store.begin(at(12))
    assert rotated.run_id != state.run_id
    assert verdict(state) is Verdict.PASS
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert len(files) == 3  # state.json, the archive, evidence.md
    for path in files:
        assert CANARY.encode() not in path.read_bytes(), path
    assert CANARY not in text
    assert CANARY not in render(rotated, now=at(13))
