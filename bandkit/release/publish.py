"""`release.publish` and `release.rebuild`: gather, plan, then (unless a dry run) act.

Order, every check before the first mutation:
1. the version grammar; 2. the quarantine gate on the SDK lock (`lock_gate`); 3. git: the
release tag `band-sdk-vX.Y.Z` (releases), a clean tree (`allow_dirty` is for
pre-release rehearsals only); 4. every registry's tags and one probe per immutable
reference; 5. the plan (`plan.plan`, which refuses with exit 1 or 2). A dry run prints the
plan (or the refusal and the part that was decidable) and stops. Otherwise `execute` runs
the steps and the summary table is printed either way; a publish that finished writes
`dist/release.json` and the workflow outputs (`record`).

`rebuild` computes the next `X.Y.Z-rN` from both registries' tags (`versions.next_rebuild`:
the minimum of the per-registry maxima, plus one), resolves the bases' current digests
(online, `kit.bump_bases`) and publishes it like `publish`, built on those digests; when no
base moved it does nothing (no `-rN`, no record), and a `-rN` one registry lacks is healed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from bandkit.image.facts import REPO_ROOT
from bandkit.kit import bump_bases
from bandkit.kit.bump_bases import Resolve
from bandkit.release import build_once, gather, lock_gate, record, versions
from bandkit.release import plan as planner
from bandkit.release.execute import Builder, Pusher, Run, execute
from bandkit.release.oci import Registries
from bandkit.release.plan import Plan, ReleaseRefused
from bandkit.release.settings import Settings
from bandkit.release.summary import Row, render
from bandkit.release.versions import Version, VersionError

SDK_LOCK = lock_gate.SDK_LOCK
Progress = Callable[[str], None]


@dataclass
class Outcome:
    plan: Plan | None
    rows: list[Row]
    dry_run: bool


def _version(text: str) -> Version:
    try:
        return versions.parse(text)
    except VersionError as exc:
        raise ReleaseRefused([str(exc)], ReleaseRefused.PRECONDITION) from None


def gate(settings: Settings, now: datetime, progress: Progress) -> None:
    result = lock_gate.run(None, settings.max_age_days, now=now)
    progress(result.render())
    if result.exit_code:
        raise ReleaseRefused(
            [f"the quarantine gate failed on {SDK_LOCK.relative_to(REPO_ROOT)} (see above); "
             "wait until the listed packages pass, then re-run"],
            result.exit_code,
        )  # fmt: skip


def _git(version: Version, allow_dirty: bool, git: gather.GitState) -> gather.GitState:
    if allow_dirty and not version.is_prerelease:
        raise ReleaseRefused(
            [f"--allow-dirty is for pre-release rehearsals (X.Y.Z-rcN) only, not {version}"],
            ReleaseRefused.PRECONDITION,
        )
    return replace(git, clean=True) if allow_dirty else git


def publish(
    settings: Settings,
    version_text: str,
    *,
    dry_run: bool = False,
    allow_dirty: bool = False,
    move_floating: bool = True,
    progress: Progress = print,
    git: gather.GitState | None = None,
    registries: Registries | None = None,
    now: datetime | None = None,
    no_cache: bool = False,
    base_pins: tuple[tuple[str, str], ...] = (),
    builder: Builder | None = None,
    pusher: Pusher | None = None,
) -> Outcome:
    """Publish `version_text` (see the module docstring); raises ReleaseRefused/Stopped."""
    version = _version(version_text)
    registries = registries or Registries()
    gate(settings, now or datetime.now(UTC), progress)
    actual = git or gather.git_state(version)
    state = _git(version, allow_dirty, actual)
    if not actual.clean and state.clean:
        progress(f"rehearsal: building {version} from a tree with uncommitted changes")
    observed = gather.observe(settings, registries, version, state)
    try:
        decided = planner.plan(str(version), observed, move_floating=move_floating)
    except ReleaseRefused as refused:
        if dry_run and refused.partial is not None:
            progress(planner.render(refused.partial))
        raise
    progress(planner.render(decided))
    if dry_run:
        progress("dry run: nothing was changed")
        return Outcome(decided, [], True)
    run = Run(
        decided,
        settings,
        registries,
        builder=builder
        or (lambda: build_once.build(settings, progress, no_cache=no_cache, build_args=base_pins)),
        source_annotation=settings.source or state.remote or f"file://{REPO_ROOT}",
        revision=actual.commit if actual.clean else f"{actual.commit}-dirty",
        progress=progress,
        pusher=pusher or build_once.push,
    )
    try:
        execute(run)
    finally:
        progress(render(run.rows, decided.skipped))
    if run.digest:
        facts = record.facts(
            settings, str(version), run.digest, run.kit_digests, run.legacy_kit_digests
        )
        progress(f"recorded {record.write(facts)} (digest, subject, version)")
    return Outcome(decided, run.rows, False)


def newest_release(tags: dict[str, list[str]]) -> Version:
    found = [
        v.base
        for listing in tags.values()
        for v in map(versions.try_parse, listing)
        if v is not None and not v.is_prerelease
    ]
    if not found:
        raise versions.NeverPublished(
            f"no registry has a release ({', '.join(tags)}): publish one first"
        )
    return max(found)


def _moved_bases(resolve: Resolve, progress: Progress) -> tuple[tuple[str, str], ...] | None:
    """The bases' current pins when any moved since the Dockerfile's, else None."""
    changes = bump_bases.bump(resolve=resolve, write=False)
    for change in changes:
        state = "moved" if change.changed else "unchanged"
        progress(f"rebuild: base {change.name} {state}: {change.new}")
    if not any(change.changed for change in changes):
        return None
    return tuple((change.name, change.new) for change in changes)


def rebuild(
    settings: Settings,
    version_text: str = "",
    *,
    progress: Progress = print,
    registries: Registries | None = None,
    resolve: Resolve | None = None,
    **options: object,
) -> Outcome | None:
    """Publish the next `-rN` of `version_text` (default: the newest release published),
    built on the bases' current digests; None (nothing done) when they have not moved.

    A `-rN` some registry already has is healed by copy first, whatever the bases. With
    `base: local` (the offline rehearsal) there are no pins to compare: it rebuilds.
    """
    registries = registries or Registries()
    tags = gather.all_tags(settings, registries)
    base = _version(version_text).base if version_text else newest_release(tags)
    target = versions.next_rebuild(base, tags)
    maxima = ", ".join(f"{name}: {len(listing)} tag(s)" for name, listing in tags.items())
    progress(f"rebuild: {base} -> {target} (minimum of the per-registry maxima + 1; {maxima})")
    healing = any(str(target) in listing for listing in tags.values())
    if not healing and settings.base == "official":
        pins = _moved_bases(resolve or bump_bases.resolve_online, progress)
        if pins is None:
            progress("rebuild: no base moved since the Dockerfile's pins: nothing to rebuild")
            return None
        options["base_pins"] = pins
    return publish(settings, str(target), progress=progress, registries=registries, **options)  # type: ignore[arg-type]


__all__ = ["Outcome", "ReleaseRefused", "publish", "rebuild"]
