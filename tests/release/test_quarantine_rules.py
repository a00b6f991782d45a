"""The quarantine gate on small hand-written locks, index answers, and the real locks.

tests/release/data/:
- `small.lock`: a current-format uv lock (`upload-time` on every artifact); the h11, idna
  and platformdirs entries are copied from the repo's uv.lock, `band-client-rest` is made
  up (a young first-party wheel), plus editable, virtual and directory members;
- `no_upload_time.lock`: the same lock with every `upload-time` removed, as older uv wrote;
- `pypi_<name>_<version>.json`: answers in the PyPI JSON API shape
  (`/pypi/<name>/<version>/json`) with the same filenames and times; the platformdirs
  answer lists only the sdist, so its wheel has no upload time anywhere;
- `malformed.lock`: an upload time that is not ISO 8601.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from bandkit.release import quarantine_rules
from bandkit.release.quarantine_rules import GateResult, Violation, check_lock, check_lock_text

DATA = Path(__file__).parent / "data"
REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = DATA / "small.lock"
# platformdirs 4.14.9, the youngest artifact in small.lock, was uploaded at this moment.
YOUNGEST = datetime(2026, 11, 27, 20, 53, 44, tzinfo=UTC)
FIRST_PARTY = ["band-client-rest"]


def recorded_fetch(calls: list[tuple[str, str]]) -> quarantine_rules.Fetch:
    def fetch(name: str, version: str) -> Mapping[str, Any]:
        calls.append((name, version))
        path = DATA / f"pypi_{name}_{version}.json"
        if not path.exists():
            raise LookupError(f"404 Not Found for {name} {version}")
        answer: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return answer

    return fetch


def test_an_old_enough_lock_passes() -> None:
    result = check_lock(SMALL, now=YOUNGEST + timedelta(days=30), exempt=FIRST_PARTY)
    assert result.exit_code == 0
    assert result.violations == []
    assert result.checked == 6  # h11 2, idna 2, platformdirs 2; first party not counted
    assert "pass (6 artifacts" in result.render()


def test_a_young_package_is_a_violation_with_its_age() -> None:
    now = YOUNGEST + timedelta(days=3, hours=12)
    result = check_lock(SMALL, now=now, exempt=FIRST_PARTY)
    assert result.exit_code == 1
    (violation,) = result.violations
    assert (violation.package, violation.version) == ("platformdirs", "4.14.9")
    assert violation.age_days == pytest.approx(3.5)
    assert violation.clears_at == YOUNGEST + timedelta(days=7)
    text = result.render()
    assert "1 package(s) fail the 7-day minimum age" in text
    assert "platformdirs 4.14.9: age 3.5 days" in text
    assert "passes from 2026-12-04T20:53Z" in text


def test_exactly_the_minimum_age_passes_and_one_second_less_fails() -> None:
    at_boundary = check_lock(SMALL, now=YOUNGEST + timedelta(days=7), exempt=FIRST_PARTY)
    assert at_boundary.exit_code == 0
    just_before = YOUNGEST + timedelta(days=7) - timedelta(seconds=1)
    assert check_lock(SMALL, now=just_before, exempt=FIRST_PARTY).exit_code == 1


def test_the_minimum_age_is_a_parameter() -> None:
    now = YOUNGEST + timedelta(days=3, hours=12)
    assert check_lock(SMALL, now=now, max_age_days=3, exempt=FIRST_PARTY).exit_code == 0
    result = check_lock(SMALL, now=now, max_age_days=80, exempt=FIRST_PARTY)
    assert [v.package for v in result.violations] == ["idna", "platformdirs"]
    assert "80-day" in result.render()


def test_now_in_another_time_zone_is_the_same_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    now = (YOUNGEST + timedelta(days=7)).astimezone(plus_two)
    assert check_lock(SMALL, now=now, exempt=FIRST_PARTY).exit_code == 0


def test_first_party_sources_and_named_packages_are_exempt() -> None:
    now = YOUNGEST + timedelta(days=7)  # band-client-rest is 4.4 days old then
    result = check_lock(SMALL, now=now, exempt=["Band_Client.REST"])  # PEP 503 spelling
    assert result.exit_code == 0
    assert set(result.exempt) == {"band-client-rest", "demo-app", "demo-tools", "local-lib"}
    assert "exempt: band-client-rest, demo-app, demo-tools, local-lib" in result.render()
    unexempted = check_lock(SMALL, now=now)
    assert [v.package for v in unexempted.violations] == ["band-client-rest"]
    assert unexempted.checked == 7


def test_a_missing_upload_time_is_a_violation() -> None:
    result = check_lock(DATA / "no_upload_time.lock", now=YOUNGEST + timedelta(days=365))
    assert result.exit_code == 1
    assert [v.package for v in result.violations] == [
        "band-client-rest",
        "h11",
        "idna",
        "platformdirs",
    ]
    assert all(v.age_days is None for v in result.violations)
    h11 = result.violations[1]
    assert h11.why == "no upload time in the lock for h11-0.16.0.tar.gz (and 1 more)"
    assert "h11 0.16.0: age unknown days" in result.render()


def test_upload_times_can_come_from_recorded_index_answers() -> None:
    calls: list[tuple[str, str]] = []
    result = check_lock(
        DATA / "no_upload_time.lock",
        now=YOUNGEST + timedelta(days=365),
        exempt=FIRST_PARTY,
        fetch=recorded_fetch(calls),
    )
    assert calls == [("h11", "0.16.0"), ("idna", "3.20"), ("platformdirs", "4.14.9")]
    (violation,) = result.violations  # the answer lists the sdist only
    assert violation.package == "platformdirs"
    assert violation.why == (
        "no upload time in the lock or the index answer for platformdirs-4.14.9-py3-none-any.whl"
    )
    assert result.checked == 6


def test_index_answers_are_judged_like_lock_times() -> None:
    calls: list[tuple[str, str]] = []
    result = check_lock(
        DATA / "no_upload_time.lock",
        now=datetime(2026, 9, 20, tzinfo=UTC),  # idna 3.20 was uploaded 2026-09-17
        exempt=["band-client-rest", "platformdirs"],
        fetch=recorded_fetch(calls),
    )
    (violation,) = result.violations
    assert violation.package == "idna"
    assert violation.age_days == pytest.approx(2.41, abs=0.01)


def test_a_failed_index_lookup_fails_closed() -> None:
    result = check_lock(
        DATA / "no_upload_time.lock",
        now=YOUNGEST + timedelta(days=365),
        fetch=recorded_fetch([]),
    )
    first = result.violations[0]
    assert first.package == "band-client-rest"
    assert first.why == "upload time lookup failed: 404 Not Found for band-client-rest 9.9.9"
    assert result.exit_code == 1


def test_an_unreadable_index_answer_is_a_violation() -> None:
    def fetch(name: str, version: str) -> Mapping[str, Any]:
        return {"info": {}, "urls": "nope"}

    result = check_lock(DATA / "no_upload_time.lock", now=YOUNGEST, fetch=fetch)
    assert len(result.violations) == 4
    assert all("has no `urls` list" in v.why for v in result.violations)


def test_a_source_without_artifacts_is_a_violation() -> None:
    text = (
        'version = 1\n[[package]]\nname = "forked"\nversion = "1.0.0"\n'
        'source = { git = "https://example.invalid/forked?rev=abc#abc" }\n'
    )
    result = check_lock_text(text, now=YOUNGEST)
    assert result.violations == [
        Violation("forked", "1.0.0", None, "git source has no index artifacts, so no upload time")
    ]


def test_a_malformed_upload_time_makes_the_lock_unreadable() -> None:
    result = check_lock(DATA / "malformed.lock", now=YOUNGEST)
    assert result.exit_code == 2
    assert result.error is not None
    assert "malformed.lock" in result.error
    assert "'last tuesday' is not ISO 8601" in result.error
    assert result.render().startswith("quarantine gate: cannot check the lock: ")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("version = 1\n[[package]\n", "not TOML"),
        ('version = 2\n[[package]]\nname = "a"\n', "lock format version 2 is not 1"),
        ("version = 1\n", "no [[package]] entries"),
        ('version = 1\n[[package]]\nversion = "1"\n', "package #1 has no name"),
        ('version = 1\n[[package]]\nname = "a"\nversion = "1"\n', "source must be a table"),
        (
            'version = 1\n[[package]]\nname = "a"\nsource = { registry = "x" }\n',
            "package a: no version",
        ),
        (
            'version = 1\n[[package]]\nname = "a"\nversion = "1"\nsource = { registry = "x" }\n'
            'wheels = "a.whl"\n',
            "wheels must be an array",
        ),
        (
            'version = 1\n[[package]]\nname = "a"\nversion = "1"\nsource = { registry = "x" }\n'
            "wheels = [ 3 ]\n",
            "an artifact must be a table",
        ),
        (
            'version = 1\n[[package]]\nname = "a"\nversion = "1"\nsource = { registry = "x" }\n'
            'sdist = { url = "a.tar.gz", upload-time = 5 }\n',
            "upload time must be a string",
        ),
    ],
)
def test_malformed_locks_are_exit_2(text: str, error: str) -> None:
    result = check_lock_text(text, now=YOUNGEST)
    assert result.exit_code == 2
    assert result.error is not None
    assert error in result.error
    assert result.checked == 0


def test_a_missing_or_binary_lock_is_exit_2(tmp_path: Path) -> None:
    missing = check_lock(tmp_path / "uv.lock", now=YOUNGEST)
    assert missing.exit_code == 2
    assert "cannot read" in (missing.error or "")
    binary = tmp_path / "binary.lock"
    binary.write_bytes(b"\xff\xfe\x00")
    assert check_lock(binary, now=YOUNGEST).exit_code == 2


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        check_lock(SMALL, now=datetime(2026, 12, 1))


def test_exit_codes_follow_the_result() -> None:
    assert GateResult([], 3).exit_code == 0
    assert GateResult([Violation("a", "1", 1.0, "young")], 3).exit_code == 1
    assert GateResult([], 0, error="broken").exit_code == 2


def test_canonical_names_follow_pep_503() -> None:
    assert quarantine_rules.canonical_name("Ruamel.YAML") == "ruamel-yaml"
    assert quarantine_rules.canonical_name("band__client-.rest") == "band-client-rest"


@pytest.mark.parametrize("lock", ["uv.lock", "docker/band_python_kit/sdk/uv.lock"])
def test_the_real_locks_parse_and_are_judged_by_now(lock: str) -> None:
    path = REPO_ROOT / lock
    far_future = check_lock(path, now=datetime(2100, 1, 1, tzinfo=UTC))
    assert far_future.exit_code == 0, far_future.render()
    assert far_future.checked > 50
    assert far_future.exempt  # the project itself is an editable first-party source
    newest = max(
        datetime.fromisoformat(stamp) for stamp in _upload_times(path.read_text(encoding="utf-8"))
    )
    before_newest = check_lock(path, now=newest - timedelta(seconds=1))
    assert before_newest.exit_code == 1
    assert before_newest.checked == far_future.checked


def _upload_times(text: str) -> list[str]:
    marker = 'upload-time = "'
    return [chunk.split('"', 1)[0] for chunk in text.split(marker)[1:]]
