"""Run a release plan's steps in order; stop at the first failure; report every step.

Each write is preceded by a fresh probe of its target (only a clear not-found lets it
through, so a reference that appeared since the plan was made is never overwritten).
Images: the first PUSH_IMAGE pushes the build and learns the digest from the registry;
every other registry gets that digest copied. Kits (each registry's, in both shapes: the
repo's current spec for `X.Y.Z`, its legacy one for `X.Y.Z-sbx-below-0.42.1`): stamped
with `<image repo>:<version>@<digest>`, validated in their shape, pushed, then read back
and compared byte for byte. VERIFY re-probes every immutable reference (images: the
digest; kits: the served config pins that registry's image digest and is in the shape
its tag names). MOVE_FLOATING re-tags (same repository, same bytes) and checks the tag
now resolves to the version's digest.

A failure stops the run with `ReleaseStopped`: exit 2 when a probe could not tell (fail
closed), else 1. Floating tags are the plan's last steps, so a stopped run never moves one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from bandkit.errors import BandkitError
from bandkit.image.facts import REPO_ROOT
from bandkit.image.refs import Repository, parse_repository
from bandkit.kit import spec as kit_spec
from bandkit.release import build_once, kit_artifact
from bandkit.release.oci import Registries, RegistryError
from bandkit.release.plan import Absent, Plan, Present, Step, StepKind
from bandkit.release.settings import Settings, Target
from bandkit.release.summary import Row

Progress = Callable[[str], None]
Builder = Callable[[], build_once.Source]
Pusher = Callable[[build_once.Source, Repository, str, Progress], None]
FAIL_CLOSED = 2


class ReleaseStopped(BandkitError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _ProbeFailed(BandkitError):
    """A probe did not give the answer the step needs (exit 2)."""

    exit_code = FAIL_CLOSED


def split_ref(ref: str) -> tuple[Repository, str]:
    """`host/name:tag` (or `@digest`) into the repository and the tag or digest."""
    sep = "@" if "@" in ref else ":"
    repo, _, reference = ref.rpartition(sep)
    return parse_repository(repo), reference


@dataclass
class Run:
    """One execution: the plan, its context, and what each step produced."""

    plan: Plan
    settings: Settings
    registries: Registries
    builder: Builder
    source_annotation: str
    revision: str
    progress: Progress = print
    pusher: Pusher = build_once.push
    rows: list[Row] = field(default_factory=list)
    digest: str | None = None
    source: build_once.Source | None = None
    pushed_from: Repository | None = None
    stamped: dict[tuple[str, str], str] = field(default_factory=dict)  # (registry, shape)
    kit_digests: dict[str, str] = field(default_factory=dict)  # kit repo -> current digest
    legacy_kit_digests: dict[str, str] = field(default_factory=dict)  # kit repo -> legacy

    @property
    def tag(self) -> str:
        return str(self.plan.version)

    def target(self, step: Step) -> Target:
        return self.settings.target(step.registry or "")

    def _absent(self, repo: Repository, tag: str) -> None:
        probe = self.registries.probe(repo, tag)
        if not isinstance(probe, Absent):
            seen = getattr(probe, "digest", None) or getattr(probe, "error", "")
            raise _ProbeFailed(
                f"{repo.ref(tag)} is no longer a clear not-found ({seen}); immutable "
                "references are never overwritten (fail closed)"
            )

    def _present(self, repo: Repository, tag: str) -> str:
        probe = self.registries.probe(repo, tag)
        if not isinstance(probe, Present):
            why = getattr(probe, "error", "absent")
            raise _ProbeFailed(f"{repo.ref(tag)} does not resolve ({why}); fail closed")
        return probe.digest

    def build(self, step: Step) -> Row:
        self.source = self.builder()
        return Row(step.ref, "-", "built", f"{self.source.attestations}")

    def push_image(self, step: Step) -> Row:
        repo, tag = split_ref(step.ref)
        self._absent(repo, tag)
        if self.pushed_from is None:
            if self.source is None:
                raise ReleaseStopped("push before build: the plan is malformed", 1)
            self.pusher(self.source, repo, tag, self.progress)
            self.digest = self._present(repo, tag)
            self.pushed_from = repo
            return Row(step.ref, self.digest, "pushed", "the build, pushed once")
        assert self.digest is not None
        self.registries.copy(self.pushed_from, self.digest, repo, tag)
        return Row(
            step.ref, self.digest, "pushed", f"the same digest, copied from {self.pushed_from.host}"
        )

    def copy_image(self, step: Step) -> Row:
        repo, tag = split_ref(step.ref)
        src, digest = split_ref(step.source or "")
        self._absent(repo, tag)
        self.registries.copy(src, digest, repo, tag)
        self.digest = digest
        return Row(step.ref, digest, "copied", f"heal: same digest from {src.host}, no rebuild")

    def stamp_kit(self, step: Step) -> Row:
        target = self.target(step)
        digest = step.digest or self.digest
        if digest is None:
            raise ReleaseStopped("stamp before the image digest is known: the plan is malformed", 1)
        self.digest = digest
        spec = kit_spec.default_spec(step.shape)
        stamped = kit_spec.stamp_file(spec, target.image.ref(self.tag), digest, None)
        verdict = kit_spec.validate_text(stamped)
        if not verdict.ok or verdict.shape != step.shape:
            problems = "; ".join(verdict.problems) or f"not the {step.shape} shape"
            raise ReleaseStopped(f"the stamped spec {spec} is invalid: {problems}", 1)
        self.stamped[(target.name, step.shape)] = stamped
        where = spec.relative_to(REPO_ROOT) if spec.is_relative_to(REPO_ROOT) else spec
        return Row(
            step.ref, "-", "stamped", f"{where}: image {target.image.ref(self.tag)}@{digest}"
        )

    def _digests(self, shape: str) -> dict[str, str]:
        return self.kit_digests if shape == "current" else self.legacy_kit_digests

    def push_kit(self, step: Step) -> Row:
        target = self.target(step)
        _, tag = split_ref(step.ref)
        self._absent(target.kit, tag)
        stamped = self.stamped[(target.name, step.shape)]
        artifact = kit_artifact.build(
            stamped, source=self.source_annotation, revision=self.revision
        )
        digest = self.registries.push_kit(target.kit, tag, artifact)
        served, _ = self.registries.manifest(target.kit, tag)
        config = self.registries.blob(target.kit, _config_digest(served))
        problems = kit_artifact.check(served, config, stamped)
        if served != artifact.manifest:
            problems.append("the manifest served differs from the one pushed")
        if problems:
            raise ReleaseStopped(f"kit {step.ref} read back wrong: {'; '.join(problems)}", 1)
        self._digests(step.shape)[target.kit_repo] = digest
        return Row(step.ref, digest, "pushed", f"{step.shape} kit, pulled back: bytes identical")

    def verify(self, step: Step) -> Row:
        target = self.target(step)
        repo, tag = split_ref(step.ref)
        digest = self._present(repo, tag)
        if repo == target.image:
            if self.digest is not None and digest != self.digest:
                raise _ProbeFailed(f"{step.ref} resolves to {digest}, not {self.digest}")
            self.digest = digest
            return Row(step.ref, digest, "verified", "resolves to the release digest")
        served, _ = self.registries.manifest(repo, tag)
        config = self.registries.blob(repo, _config_digest(served))
        text = config.decode("utf-8", errors="replace")
        pinned = (yaml.safe_load(text) or {}).get("sandbox", {}).get("image")
        wanted = f"{target.image.ref(self.tag)}@{self.digest}"
        if pinned != wanted:
            raise _ProbeFailed(f"kit {step.ref} pins {pinned!r}, not {wanted}")
        shape = kit_spec.validate_text(text).shape
        if shape != step.shape:
            raise _ProbeFailed(
                f"kit {step.ref} is in the {shape or 'unknown'} spec shape, not {step.shape}; "
                "publish a new version"
            )
        self._digests(step.shape)[target.kit_repo] = digest
        return Row(step.ref, digest, "verified", f"{step.shape} shape, pins {target.name}'s image")

    def move_floating(self, step: Step) -> Row:
        repo, name = split_ref(step.ref)
        target = self.target(step)
        digest = self.digest if repo == target.image else self.kit_digests[target.kit_repo]
        if digest is None:
            raise ReleaseStopped("floating move before verification: the plan is malformed", 1)
        self.registries.copy(repo, digest, repo, name)
        if self._present(repo, name) != digest:
            raise _ProbeFailed(f"{step.ref} does not resolve to {digest} after the move")
        return Row(step.ref, digest, "moved", step.reason)


def _config_digest(manifest: bytes) -> str:
    return str(json.loads(manifest)["config"]["digest"])


ACTIONS: dict[StepKind, Callable[[Run, Step], Row]] = {
    StepKind.BUILD: Run.build,
    StepKind.PUSH_IMAGE: Run.push_image,
    StepKind.COPY_IMAGE: Run.copy_image,
    StepKind.STAMP_KIT: Run.stamp_kit,
    StepKind.PUSH_KIT: Run.push_kit,
    StepKind.VERIFY: Run.verify,
    StepKind.MOVE_FLOATING: Run.move_floating,
}


def execute(run: Run) -> list[Row]:
    """Run every step; on failure record it, list the rest as not run, and raise."""
    steps = run.plan.steps
    for index, step in enumerate(steps, 1):
        run.progress(f"[{index}/{len(steps)}] {step.kind.value} {step.ref}: {step.reason}")
        started = time.monotonic()
        try:
            row = ACTIONS[step.kind](run, step)
        except (BandkitError, RegistryError) as exc:
            code = FAIL_CLOSED if isinstance(exc, RegistryError) else exc.exit_code
            run.rows.append(Row(step.ref, "-", "FAILED", str(exc).splitlines()[0][:200]))
            run.rows += [
                Row(s.ref, "-", "not run", f"{s.kind.value}: stopped at step {index}")
                for s in steps[index:]
            ]
            floating = any(s.kind is StepKind.MOVE_FLOATING for s in steps[index - 1 :])
            tail = "; no floating tag moved" if floating else ""
            raise ReleaseStopped(
                f"step {index}/{len(steps)} ({step.kind.value} {step.ref}) failed: {exc}{tail}"
                + (" (exit 2: fail closed)" if code == FAIL_CLOSED else ""),
                code,
            ) from None
        row.seconds, row.step = time.monotonic() - started, step.kind.value
        run.progress(f"[{index}/{len(steps)}] {row.result} in {row.seconds:.1f}s")
        run.rows.append(row)
    return run.rows
