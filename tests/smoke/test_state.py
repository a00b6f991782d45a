"""Smoke state: model rules, phase moves, probes, ids, and the private, rotating store."""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from bandkit.errors import BandkitError
from smoke import state as st
from smoke.state import Label, Phase, ReapKind, SmokeState, StateError, StateStore, Unreaped

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
RUN = "0a1b2c3d"
STALE = timedelta(hours=12)
CREDENTIAL_NAME = re.compile(r"key|token|secret|password|credential", re.IGNORECASE)

DOCUMENTED_MOVES = {
    (Phase.STARTED, Phase.AWAITING_WIFI_RECOVERY),
    (Phase.AWAITING_WIFI_RECOVERY, Phase.AWAITING_SLEEP_WAKE),
    (Phase.AWAITING_SLEEP_WAKE, Phase.DAEMON_RESTART),
    (Phase.DAEMON_RESTART, Phase.COMPLETED),
    *((p, Phase.FAILED) for p in Phase if p not in (Phase.COMPLETED, Phase.FAILED)),
}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fresh(run_id: str = RUN) -> SmokeState:
    return st.new_state(run_id, now=T0)


def in_phase(phase: Phase) -> SmokeState:
    state = fresh()
    if phase is Phase.FAILED:
        return st.advance(state, Phase.FAILED, now=T0)
    while state.phase is not phase:
        state = st.advance(state, st.FORWARD[state.phase], now=T0)
    return state


def tokens(*values: str) -> Callable[[int], str]:
    feed = iter(values)
    return lambda nbytes: next(feed) if nbytes == 4 else "wrong-size"


@pytest.mark.parametrize("run_id", ["0A1B2C3D", "0a1b2c3", "0a1b2c3d4", "zzzzzzzz", "", "0a1b 2c3"])
def test_run_id_must_be_eight_lowercase_hex(run_id: str) -> None:
    with pytest.raises(StateError, match="run_id"):
        st.new_state(run_id, now=T0)


def test_fresh_state_starts_with_one_transition_and_utc_times() -> None:
    plus2 = timezone(timedelta(hours=2))
    state = st.new_state(RUN, now=datetime(2026, 3, 1, 11, 0, tzinfo=plus2))
    assert (state.phase, state.started_at) == (Phase.STARTED, T0)
    assert state.started_at.utcoffset() == timedelta(0)
    assert [(t.phase, t.at) for t in state.transitions] == [(Phase.STARTED, T0)]
    assert (state.probes, state.unreaped, state.observations) == ([], [], {})
    with pytest.raises(StateError, match="timezone"):
        st.new_state(RUN, now=datetime(2026, 3, 1, 9, 0))  # a naive time is refused


def test_no_field_anywhere_in_the_schema_can_hold_a_credential() -> None:
    schema = SmokeState.model_json_schema()
    models = [schema, *schema["$defs"].values()]
    names = {name for model in models for name in model.get("properties", {})}
    assert {"run_id", "probes", "marker", "label", "kind", "id", "phase"} <= names  # walked
    suspicious = {n for n in names if CREDENTIAL_NAME.search(n) and n != "marker"}
    assert suspicious == set()


def test_unknown_fields_are_refused_so_a_key_cannot_be_stored() -> None:
    with pytest.raises(ValidationError, match="api_key"):
        SmokeState(run_id=RUN, started_at=T0, updated_at=T0, api_key="x")  # type: ignore[call-arg]
    data = fresh().model_dump(mode="json")
    probe = {
        "label": "initial",
        "marker": "m",
        "passed": True,
        "detail": "",
        "at": "2026-03-01T09:00:00Z",
    }
    with pytest.raises(ValidationError, match="token"):
        SmokeState.model_validate({**data, "probes": [{**probe, "token": "x"}]})


def test_every_phase_has_exactly_one_non_empty_operator_message() -> None:
    messages = st.OPERATOR_MESSAGES
    assert list(messages) == list(Phase)
    assert all(text.strip() for text in messages.values())
    assert len(set(messages.values())) == len(Phase)
    st.check_messages(messages)  # the check the module runs at import
    with pytest.raises(StateError, match="failed"):
        st.check_messages({**messages, Phase.FAILED: "  "})
    partial: dict[Phase, str] = {p: m for p, m in messages.items() if p != Phase.DAEMON_RESTART}
    with pytest.raises(BandkitError, match="daemon-restart"):  # StateError is a BandkitError
        st.check_messages(partial)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(Phase, Phase)))
def test_advance_allows_only_the_documented_moves(source: Phase, target: Phase) -> None:
    before = in_phase(source)
    if (source, target) in DOCUMENTED_MOVES:
        after = st.advance(before, target, now=at(30))
        assert after.phase is target
        assert (after.transitions[-1].phase, after.transitions[-1].at) == (target, at(30))
        assert after.updated_at == at(30)
        assert before.phase is source  # pure: the input is unchanged
    else:
        with pytest.raises(StateError, match=f"from {source} to {target}"):
            st.advance(before, target, now=at(30))


def test_retries_append_and_latest_is_the_last_recorded_attempt() -> None:
    state = st.record_probe(fresh(), Label.INITIAL, "m1", False, "timeout", now=at(5))
    state = st.record_probe(state, Label.INITIAL, "m2", True, "ok", now=at(3))  # clock jumped
    state = st.record_probe(state, Label.PROVISION, "", True, "agent a1", now=at(4))
    assert [p.marker for p in state.probes] == ["m1", "m2", ""]
    latest = st.latest_probes(state)
    assert set(latest) == {Label.INITIAL, Label.PROVISION}
    assert (latest[Label.INITIAL].marker, latest[Label.INITIAL].passed) == ("m2", True)
    assert state.updated_at == at(4)
    with pytest.raises(StateError, match="label"):
        st.record_probe(state, "bogus", "m", True, "", now=at(6))  # type: ignore[arg-type]


@pytest.mark.parametrize("phase", [Phase.COMPLETED, Phase.FAILED])
def test_a_finished_run_takes_only_cleanup_probes(phase: Phase) -> None:
    done = in_phase(phase)
    with pytest.raises(StateError, match="fresh run"):
        st.record_probe(done, Label.INITIAL, "m", True, "", now=at(1))
    after = st.record_probe(done, Label.CLEANUP, "", True, "reaped", now=at(1))
    assert after.probes[-1].label is Label.CLEANUP


def test_observations_take_known_and_free_keys_and_a_later_note_replaces() -> None:
    state = st.record_observation(fresh(), st.ObservationKey.SLEEP_WAKE, "first", now=at(1))
    state = st.record_observation(state, "sleep_wake", "second", now=at(2))
    state = st.record_observation(state, "wifi-2_ghz", "free key", now=at(3))
    assert state.observations == {"sleep_wake": "second", "wifi-2_ghz": "free key"}
    known = {"network_cut", "sleep_wake", "daemon_restart", "platform_restart"}
    assert known <= set(st.ObservationKey)


@pytest.mark.parametrize("key", ["Upper", "1abc", "", "a" * 42, "has space", "api_key", "my-token"])
def test_bad_observation_keys_are_refused(key: str) -> None:
    with pytest.raises(StateError, match="observation"):
        st.record_observation(fresh(), key, "text", now=at(1))


def test_with_fields_keeps_every_replaced_id_until_it_is_marked_reaped() -> None:
    state = st.with_fields(fresh(), now=at(1), sandbox_name="smk", sdk_version="6.0.1")
    assert (state.sandbox_name, state.sdk_version, state.updated_at) == ("smk", "6.0.1", at(1))
    for name in ("api_key", "phase", "run_id"):
        with pytest.raises(StateError, match=name):
            st.with_fields(state, now=at(2), **{name: "x"})
    state = st.with_fields(fresh(), now=at(1), agent_id="a1", room_id="r1")
    state = st.with_fields(state, now=at(2), agent_id="a2")  # re-provisioned after a restart
    assert state.agent_id == "a2"
    assert state.unreaped == [Unreaped(kind=ReapKind.AGENT, id="a1")]
    state = st.mark_reaped(state, ReapKind.AGENT, "a1", now=at(3))
    state = st.mark_reaped(state, ReapKind.ROOM, "r1", now=at(3))
    assert (state.unreaped, state.agent_id, state.room_id) == ([], "a2", "")


def test_save_is_private_and_round_trips(tmp_path: Path) -> None:
    root = tmp_path / ".sandbox-smoke"
    root.mkdir()
    os.chmod(root, 0o750)  # noqa: S103 (a directory made wider than 0700, on purpose)
    store = StateStore(root)
    state = st.record_probe(fresh(), Label.INITIAL, "m", True, "ok", now=at(1))
    store.save(state)
    assert stat.S_IMODE(store.state_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert sorted(p.name for p in root.iterdir()) == ["state.json"]  # no temp file left
    assert store.load() == state
    assert json.loads(store.state_path.read_text())["started_at"] == "2026-03-01T09:00:00Z"


def test_a_planted_symlink_is_neither_read_nor_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text(fresh("ffffffff").model_dump_json())
    os.chmod(victim, 0o644)
    before = victim.read_bytes()
    store = StateStore(tmp_path / "smoke")
    store.root.mkdir(mode=0o700)
    store.state_path.symlink_to(victim)
    with pytest.raises(StateError, match="symbolic link"):
        store.load()
    store.save(fresh())
    assert not store.state_path.is_symlink()
    assert stat.S_IMODE(store.state_path.stat().st_mode) == 0o600
    assert (victim.read_bytes(), stat.S_IMODE(victim.stat().st_mode)) == (before, 0o644)
    assert store.load() == fresh()


BAD_FILES = {
    "not-json": b"{not json",
    "not-utf8": b"\xff\xfe\x00",
    "a-list": b"[]",
    "foreign": b'{"name": "someone else", "version": 3}',
    "bad-run-id": fresh().model_dump_json().replace(RUN, "NOT-HEX!").encode(),
    "has-a-key": fresh().model_dump_json().replace('"phase"', '"api_key":"x","phase"').encode(),
}


@pytest.mark.parametrize("content", list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_a_bad_state_file_names_itself_and_is_kept(tmp_path: Path, content: bytes) -> None:
    store = StateStore(tmp_path)
    store.state_path.write_bytes(content)
    for call in (store.load, lambda: store.begin(T0, token=tokens("feedf00d"))):
        with pytest.raises(StateError) as info:
            call()
        message = str(info.value)
        assert str(store.state_path) in message
        assert "move it away" in message
        assert "\n" not in message
    assert store.state_path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # nothing archived


@pytest.mark.parametrize("phase", [Phase.COMPLETED, Phase.FAILED])
def test_begin_archives_a_terminal_run_and_starts_fresh(tmp_path: Path, phase: Phase) -> None:
    store = StateStore(tmp_path)
    done = in_phase(phase)
    store.save(done)
    new = store.begin(at(1), token=tokens("feedf00d"))
    assert (new.run_id, new.phase, new.started_at) == ("feedf00d", Phase.STARTED, at(1))
    archived = store.archive_path(RUN)
    assert archived.name == f"state.{RUN}.json"
    assert SmokeState.model_validate_json(archived.read_text()) == done
    assert stat.S_IMODE(archived.stat().st_mode) == 0o600
    assert store.load() == new


HALF_HOUR, SECOND = timedelta(minutes=30), timedelta(seconds=1)
AGES = [(STALE, STALE, True), (3 * STALE, STALE, True), (STALE - SECOND, STALE, False)]


@pytest.mark.parametrize(("age", "stale_after", "rotated"), [*AGES, (HALF_HOUR, HALF_HOUR, True)])
def test_begin_rotates_a_run_not_updated_for_twelve_hours(
    tmp_path: Path, age: timedelta, stale_after: timedelta, rotated: bool
) -> None:
    store = StateStore(tmp_path)
    live = st.record_probe(in_phase(Phase.DAEMON_RESTART), Label.INITIAL, "m", True, "", now=T0)
    store.save(live)
    before = store.state_path.read_bytes()
    state = store.begin(T0 + age, stale_after=stale_after, token=tokens("feedf00d"))
    assert (state.run_id == "feedf00d") is rotated
    assert store.archive_path(RUN).exists() is rotated
    if not rotated:  # resumed as it was: same state, file not rewritten
        assert (state, store.state_path.read_bytes()) == (live, before)


def test_unreaped_and_live_ids_carry_over_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    old = st.with_fields(fresh(), now=at(1), agent_id="a1", room_id="r1")
    old = st.with_fields(old, now=at(2), room_id="r2")  # r1 moves to unreaped, r2 is live
    old = st.advance(old, Phase.FAILED, now=at(3))
    store.save(old)
    new = store.begin(at(4), token=tokens("feedf00d"))
    carried = [(u.kind, u.id) for u in new.unreaped]
    assert carried == [("room", "r1"), ("agent", "a1"), ("room", "r2")]
    assert (new.agent_id, new.room_id) == ("", "")
    again = store.begin(at(5), token=tokens("0badcafe"))
    assert again == new  # resumed, nothing duplicated


def test_a_new_run_id_never_reuses_the_old_or_an_archived_one(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.archive(fresh("11111111"))
    store.save(in_phase(Phase.FAILED))
    new = store.begin(at(1), token=tokens(RUN, "11111111", "22222222"))
    assert new.run_id == "22222222"
    store.save(in_phase(Phase.FAILED))
    with pytest.raises(StateError, match="run id"):
        store.begin(at(2), token=lambda _n: RUN)


def test_begin_without_a_run_starts_and_saves_one(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "smoke")
    with pytest.raises(StateError, match="timezone"):
        store.begin(datetime(2026, 3, 1, 9, 0))
    assert store.load() is None
    state = store.begin(T0, token=tokens("feedf00d"))
    assert (state.run_id, state.phase, state.started_at) == ("feedf00d", Phase.STARTED, T0)
    assert store.load() == state
