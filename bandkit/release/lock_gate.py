"""`release.lock-age`: the quarantine gate run on a lock file: the pure rules
(`quarantine_rules`) given the clock, PyPI lookups and band's own packages.

The default lock is the SDK's (`docker/band_python_kit/sdk/uv.lock`, what the image
bakes in). Band's own packages are exempt (`FIRST_PARTY`): a new band-sdk upload is what
a kit release ships, so it is young by design. `lookup` asks PyPI's JSON API for upload
times the lock lacks (online); without it a missing upload time is a violation, as it is
when the lookup fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bandkit.image.facts import SDK_PROJECT
from bandkit.release import quarantine_rules

SDK_LOCK = SDK_PROJECT / "uv.lock"
PYPI_JSON = "https://pypi.org/pypi/{name}/{version}/json"
LOOKUP_TIMEOUT_S = 20.0
FIRST_PARTY = (
    "band-sdk",
    "band-sdk-core",
    "band-client-rest",
    "band-testing-python",
    "phoenix-channels-python-client",
)


def pypi_fetch(name: str, version: str) -> Mapping[str, Any]:
    """PyPI's JSON answer for one release (raises on any failure: the gate fails closed)."""
    response = httpx.get(PYPI_JSON.format(name=name, version=version), timeout=LOOKUP_TIMEOUT_S)
    response.raise_for_status()
    answer = response.json()
    if not isinstance(answer, dict):
        raise ValueError("PyPI answered something other than an object")
    return answer


def run(
    lock: Path | None,
    max_age_days: float,
    exempt: Iterable[str] = (),
    *,
    lookup: bool = False,
    now: datetime | None = None,
) -> quarantine_rules.GateResult:
    return quarantine_rules.check_lock(
        lock or SDK_LOCK,
        now=now or datetime.now(UTC),
        max_age_days=max_age_days,
        exempt=(*FIRST_PARTY, *exempt),
        fetch=pypi_fetch if lookup else None,
    )
