"""Release rehearsal benchmark: `release.publish --version 0.0.0-rc1` against two registries.

- warm: two fresh registries on 127.0.0.1, the build cached (what CI's rehearsal pays
  when the image tests ran first);
- heal: one registry already has the version (a copy of the warm one's digest), the other
  gets it copied; no build;
- cold (last): two fresh registries and a `--no-cache` build (every kit layer rebuilt on
  the local bases, arm64 under qemu), then the whole publish.
Each line gives the wall time (gather, gate and plan included) and each step kind's share
of the step time. Target: the warm rehearsal <= 180 s on a 2-core machine. The same
`publish` the task runs is called in-process (`allow_dirty`: a rehearsal of the working
tree). Needs a Docker daemon and the local bases (`invoke image.bases --arch arm64`).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from bandkit.bench import docker_ok, quick
from bandkit.errors import BandkitError
from bandkit.image import bases as image_bases
from bandkit.image.registry import local_registry
from bandkit.release import publish as release
from bandkit.release.oci import Registries
from bandkit.release.settings import Settings, from_config
from bandkit.release.summary import Row

VERSION = "0.0.0-rc1"
TARGET_WARM_S = 180.0
SKIP = "release: skipped: no Docker daemon answers (`uv run invoke ci.prepare --lane docker_tests`)"


@contextlib.contextmanager
def _pair() -> Iterator[Settings]:
    with contextlib.ExitStack() as stack:
        addrs = [
            stack.enter_context(local_registry(Path(stack.enter_context(_tmp())))) for _ in range(2)
        ]
        yield from_config(
            {
                "hub_image": f"{addrs[0]}/bandhq/band-python-kit-image",
                "hub_kit": f"{addrs[0]}/bandhq/band-python-kit",
                "ghcr_image": f"{addrs[1]}/band-ai/band-python-kit/image",
                "ghcr_kit": f"{addrs[1]}/band-ai/band-python-kit",
                "base": "local",
            }
        )


def _tmp() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="bandkit-bench-release-")


def _shares(label: str, wall: float, rows: list[Row]) -> str:
    spent: dict[str, float] = defaultdict(float)
    for row in rows:
        spent[row.step] += row.seconds or 0.0
    total = sum(spent.values()) or 1.0
    parts = ", ".join(f"{kind} {secs:.1f}s ({secs / total:.0%})" for kind, secs in spent.items())
    return f"release: {label}: {wall:.1f}s wall; steps: {parts}"


def _publish(settings: Settings, *, no_cache: bool) -> tuple[float, list[Row]]:
    start = time.monotonic()
    outcome = release.publish(
        settings, VERSION, allow_dirty=True, progress=lambda _line: None, no_cache=no_cache
    )
    return time.monotonic() - start, outcome.rows


def _phase(label: str, settings: Settings, lines: list[str], *, no_cache: bool) -> list[Row]:
    """One publish, its line (or why it failed) appended; the rows for the next phase."""
    try:
        wall, rows = _publish(settings, no_cache=no_cache)
    except BandkitError as exc:
        lines.append(f"release: {label}: failed: {str(exc).splitlines()[0][:160]}")
        return []
    lines.append(_shares(label, wall, rows))
    if label.startswith("warm"):
        verdict = "meets" if wall <= TARGET_WARM_S else "misses"
        lines.append(f"release: warm {wall:.1f}s {verdict} the {TARGET_WARM_S:.0f}s target")
    return rows


def run() -> list[str]:
    """Warm and heal first (they use the build cache as it is), cold last (it resets it:
    the classic builder re-runs steps on the first build after a --no-cache one)."""
    if not docker_ok():
        return [SKIP]
    image_bases.ensure_bases(("amd64", "arm64"), progress=lambda _line: None)
    lines: list[str] = []
    with _pair() as settings:
        rows = _phase("warm (fresh registries, cached build)", settings, lines, no_cache=False)
        digest = next((r.digest for r in rows if r.step == "push-image"), None)
        if digest is not None:
            with _pair() as other:
                Registries().copy(
                    settings.target("hub").image, digest, other.target("hub").image, VERSION
                )
                _phase("heal (one registry pre-populated, no build)", other, lines, no_cache=False)
    if quick():
        lines.append("release: cold: skipped in quick mode (a --no-cache build of both arches)")
        return lines
    with _pair() as settings:
        _phase("cold (fresh registries, --no-cache build)", settings, lines, no_cache=True)
    return lines
