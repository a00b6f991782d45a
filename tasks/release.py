"""`release.*`: publish the image and the kit to both registries (bandkit/release/).

Exit codes: 0 done; 1 a precondition or step failed (the message says what to do);
2 fail closed: a registry probe answered anything but a clear not-found, or a version
already exists (immutable references are never overwritten).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit.errors import BandkitError
from bandkit.release.settings import DEFAULTS
from tasks._common import reports

CONFIG = {"release": dict(DEFAULTS)}  # the collection's defaults (tasks/__init__.py)


def _settings(c: Context) -> Any:
    from bandkit.release import settings

    return settings.from_config(dict(c.config.get("release", {})))


def _say(line: str) -> None:
    print(line, flush=True)


PUBLISH_HELP = {
    "version": "the immutable version to publish: X.Y.Z, X.Y.Z-rN, or X.Y.Z-rcN (rehearsal)",
    "dry_run": "gather and print the plan; change nothing",
    "allow_dirty": "rehearsals (X.Y.Z-rcN) only: build from uncommitted changes",
    "no_floating": "leave `latest` and the major tag where they are",
}


@task(help=PUBLISH_HELP)
@reports("release.publish")
def publish(
    c: Context,
    version: str = "",
    dry_run: bool = False,
    allow_dirty: bool = False,
    no_floating: bool = False,
) -> None:
    """Build once (amd64 + arm64), publish image and kit to both registries, floating tags last.

    Registries come from the `release` configuration (invoke.yaml or INVOKE_RELEASE_*):
    hub_image, hub_kit, ghcr_image, ghcr_kit. A registry that already has the version heals
    the other by copying its digest; nothing immutable is ever overwritten.
    """
    from bandkit.release import publish as release

    if not version:
        raise BandkitError("--version is required, e.g. --version 1.2.3 (or 0.0.0-rc1 to rehearse)")
    release.publish(
        _settings(c),
        version,
        dry_run=dry_run,
        allow_dirty=allow_dirty,
        move_floating=not no_floating,
        progress=_say,
    )


@task(
    help={
        "version": "the release to rebuild, X.Y.Z (default: the newest one published)",
        "dry_run": PUBLISH_HELP["dry_run"],
        "no_floating": PUBLISH_HELP["no_floating"],
    }
)
@reports("release.rebuild")
def rebuild(
    c: Context, version: str = "", dry_run: bool = False, no_floating: bool = False
) -> None:
    """Publish the next X.Y.Z-rN (CVE rebuild) on the bases' current digests, if any moved.

    N is the minimum over both registries of their highest revision, plus one, so a
    rebuild that reached only one registry is healed rather than skipped.
    """
    from bandkit.release import publish as release

    release.rebuild(
        _settings(c), version, progress=_say, dry_run=dry_run, move_floating=not no_floating
    )


@task(
    name="lock-age",
    help={
        "days": "minimum age in days of every locked artifact (default: release.max_age_days, 7)",
        "lock": "the lock to check (default: the SDK lock, docker/band_python_kit/sdk/uv.lock)",
        "exempt": "another package name to exempt (repeatable; Band's own always are)",
        "lookup": "ask PyPI for upload times the lock lacks (online)",
    },
    iterable=["exempt"],
)
def lock_age(
    c: Context,
    days: float = -1.0,
    lock: str = "",
    exempt: list[str] | None = None,
    lookup: bool = False,
) -> None:
    """The quarantine gate: 0 pass, 1 violations (listed), 2 the lock cannot be read."""
    from bandkit.release import lock_gate

    max_age = days if days >= 0 else float(c.config.get("release", {}).get("max_age_days", 7))
    result = lock_gate.run(Path(lock) if lock else None, max_age, exempt or (), lookup=lookup)
    print(result.render())
    if result.exit_code:
        raise Exit(code=result.exit_code)


@task(
    name="refresh-locks",
    help={
        "days": "only versions at least this many days old (default: release.max_age_days, 7)",
        "project": "one uv project directory to refresh (repeatable; default: every one)",
    },
    iterable=["project"],
)
def refresh_locks(c: Context, days: float = -1.0, project: list[str] | None = None) -> None:
    """Upgrade every uv lock to the newest versions N days old, then run the quarantine gate.

    `uv lock --upgrade --exclude-newer <now - N days>` per project (then a plain `uv lock`:
    the same pins, no cutoff recorded), then `release.lock-age` on every lock. Needs the
    index (online, or a warm uv cache); when a uv run or the gate fails, every lock is put
    back and nothing changes. Exit 0 refreshed and passing, 1 failed (nothing changed), 2 a
    lock is missing or unreadable.
    """
    from bandkit.release import lock_refresh

    max_age = days if days >= 0 else float(c.config.get("release", {}).get("max_age_days", 7))
    result = lock_refresh.refresh(tuple(project or lock_refresh.UV_PROJECTS), days=max_age)
    print(result.render())
    if result.exit_code:
        raise Exit(code=result.exit_code)
