"""The quarantine gate's rules: every locked dependency must have been on the index for N days.

A freshly uploaded release of a dependency is the window in which a hijacked or broken
upload does its damage; waiting a few days (default 7) lets the index and the community
catch it before the kit image bakes it in. The gate runs before any build.

Input is a `uv.lock` (TOML, `version = 1`): each `[[package]]` has a `source`, and each
artifact (`sdist`, `wheels`) carries the index's `upload-time` (PEP 700), e.g.
`"2026-10-25T09:45:55.71Z"`. Rules:

- a package passes when its youngest artifact was uploaded at least `max_age_days` before
  `now` (exactly N days passes);
- an artifact without an upload time is a violation, unless an injected `fetch` finds the
  time in a PyPI-JSON-shaped answer (`{"urls": [{"filename", "upload_time_iso_8601"}]}`);
  a failed lookup is a violation too (fail closed);
- first-party packages are exempt: the lock's own `virtual`, `editable` and `directory`
  sources, and any name in `exempt` (compared after PEP 503 normalisation);
- a lock that cannot be read or does not have this shape is exit 2, not a pass.

No clock: `now` is passed in and must be timezone-aware.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

DEFAULT_MAX_AGE_DAYS = 7.0
FIRST_PARTY_SOURCES = frozenset({"virtual", "editable", "directory"})
Fetch = Callable[[str, str], Mapping[str, Any]]
_SECONDS_PER_DAY = 86400.0


class _Unreadable(Exception):
    """The lock is not the expected shape (becomes `GateResult.error`, exit 2)."""


@dataclass(frozen=True)
class Violation:
    """One package that fails the gate; `age_days` is None when no upload time was found."""

    package: str
    version: str
    age_days: float | None
    why: str
    clears_at: datetime | None = None  # when waiting alone would make it pass


@dataclass(frozen=True)
class GateResult:
    """`checked` counts artifacts (sdists and wheels) of non-exempt packages."""

    violations: list[Violation]
    checked: int
    exempt: tuple[str, ...] = ()
    error: str | None = None
    max_age_days: float = DEFAULT_MAX_AGE_DAYS

    @property
    def exit_code(self) -> int:
        """0 pass, 1 violations, 2 the lock could not be checked."""
        if self.error is not None:
            return 2
        return 1 if self.violations else 0

    def render(self) -> str:
        days = f"{self.max_age_days:g}"
        if self.error is not None:
            return f"quarantine gate: cannot check the lock: {self.error}"
        exempt = f"; exempt: {', '.join(self.exempt)}" if self.exempt else ""
        if not self.violations:
            return (
                f"quarantine gate: pass ({self.checked} artifacts, every one uploaded at "
                f"least {days} days ago{exempt})"
            )
        lines = [
            f"quarantine gate: {len(self.violations)} package(s) fail the {days}-day "
            f"minimum age ({self.checked} artifacts checked{exempt}):"
        ]
        for v in self.violations:
            age = "unknown" if v.age_days is None else f"{v.age_days:.1f}"
            wait = f"; passes from {v.clears_at:%Y-%m-%dT%H:%MZ}" if v.clears_at else ""
            lines.append(f"  {v.package} {v.version}: age {age} days: {v.why}{wait}")
        return "\n".join(lines)


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name: `Ruamel.YAML` and `ruamel-yaml` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse_time(value: object, where: str) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise _Unreadable(f"{where}: upload time {value[:40]!r} is not ISO 8601") from None
    else:
        raise _Unreadable(f"{where}: upload time must be a string, got {type(value).__name__}")
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


@dataclass(frozen=True)
class _Artifact:
    filename: str
    uploaded: datetime | None


@dataclass(frozen=True)
class _Package:
    name: str
    version: str
    source: str
    artifacts: tuple[_Artifact, ...]


def _artifact(entry: object, where: str) -> _Artifact:
    if not isinstance(entry, dict):
        raise _Unreadable(f"{where}: an artifact must be a table")
    location = entry.get("filename") or entry.get("url") or entry.get("path") or "?"
    filename = PurePosixPath(str(location)).name
    raw = entry.get("upload-time")
    return _Artifact(filename, None if raw is None else _parse_time(raw, f"{where} {filename}"))


def _packages(text: str) -> list[_Package]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _Unreadable(f"not TOML: {exc}") from None
    if data.get("version") != 1:
        raise _Unreadable(f"lock format version {data.get('version')!r} is not 1")
    entries = data.get("package")
    if not isinstance(entries, list) or not entries:
        raise _Unreadable("no [[package]] entries")
    packages: list[_Package] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _Unreadable(f"package #{index + 1} has no name")
        name = entry["name"]
        source = entry.get("source")
        if not isinstance(source, dict) or len(source) != 1:
            raise _Unreadable(f"package {name}: source must be a table with one kind")
        kind = next(iter(source))
        version = entry.get("version", "")
        if not isinstance(version, str) or (not version and kind not in FIRST_PARTY_SOURCES):
            raise _Unreadable(f"package {name}: no version")
        wheels = entry.get("wheels", [])
        if not isinstance(wheels, list):
            raise _Unreadable(f"package {name}: wheels must be an array")
        sdist = [entry["sdist"]] if "sdist" in entry else []
        artifacts = tuple(_artifact(a, f"package {name}") for a in (*sdist, *wheels))
        packages.append(_Package(name, version, kind, artifacts))
    return packages


def _index_times(fetch: Fetch, package: _Package) -> dict[str, datetime]:
    """Filename -> upload time from the index answer; raises on any failure."""
    answer = fetch(package.name, package.version)
    urls = answer.get("urls")
    if not isinstance(urls, list):
        raise ValueError("the answer has no `urls` list")
    times: dict[str, datetime] = {}
    for item in urls:
        if isinstance(item, dict) and isinstance(item.get("filename"), str):
            raw = item.get("upload_time_iso_8601") or item.get("upload_time")
            if raw is not None:
                times[item["filename"]] = _parse_time(raw, f"index answer {item['filename']}")
    return times


def _judge(
    package: _Package, now: datetime, max_age: timedelta, fetch: Fetch | None
) -> Violation | None:
    name, version = package.name, package.version
    if not package.artifacts:
        why = f"{package.source} source has no index artifacts, so no upload time"
        return Violation(name, version, None, why)
    artifacts = package.artifacts
    if fetch is not None and any(a.uploaded is None for a in artifacts):
        try:
            times = _index_times(fetch, package)
        except Exception as exc:  # any lookup failure fails closed, as a violation
            return Violation(name, version, None, f"upload time lookup failed: {exc}")
        artifacts = tuple(
            _Artifact(a.filename, a.uploaded or times.get(a.filename)) for a in artifacts
        )
    missing = [a.filename for a in artifacts if a.uploaded is None]
    if missing:
        where = "in the lock or the index answer" if fetch else "in the lock"
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return Violation(name, version, None, f"no upload time {where} for {missing[0]}{more}")
    youngest = max(a.uploaded for a in artifacts if a.uploaded is not None)
    age = now - youngest
    if age >= max_age:
        return None
    days = age.total_seconds() / _SECONDS_PER_DAY
    why = f"uploaded {youngest:%Y-%m-%dT%H:%M:%SZ}, younger than the minimum age"
    return Violation(name, version, days, why, youngest + max_age)


def check_lock_text(
    text: str,
    *,
    now: datetime,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    exempt: Iterable[str] = (),
    fetch: Fetch | None = None,
) -> GateResult:
    """Run the gate over the text of a `uv.lock`."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if max_age_days < 0:
        raise ValueError("max_age_days must not be negative")
    try:
        packages = _packages(text)
        exempted = {canonical_name(n) for n in exempt}
        skipped: list[str] = []
        violations: list[Violation] = []
        checked = 0
        for package in packages:
            first_party = package.source in FIRST_PARTY_SOURCES
            if first_party or canonical_name(package.name) in exempted:
                skipped.append(package.name)
                continue
            checked += len(package.artifacts)
            found = _judge(package, now, timedelta(days=max_age_days), fetch)
            if found is not None:
                violations.append(found)
    except _Unreadable as exc:
        return GateResult([], 0, error=str(exc), max_age_days=max_age_days)
    return GateResult(violations, checked, tuple(skipped), max_age_days=max_age_days)


def check_lock(
    path: Path,
    *,
    now: datetime,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    exempt: Iterable[str] = (),
    fetch: Fetch | None = None,
) -> GateResult:
    """Run the gate over a `uv.lock` file; an unreadable file is `exit_code` 2."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return GateResult([], 0, error=f"cannot read {path}: {exc}", max_age_days=max_age_days)
    result = check_lock_text(text, now=now, max_age_days=max_age_days, exempt=exempt, fetch=fetch)
    if result.error is not None:
        return GateResult([], 0, error=f"{path}: {result.error}", max_age_days=max_age_days)
    return result
