"""The publish planner: an observed registry snapshot in, an ordered plan (or a refusal) out.

Pure: the caller gathers an `Observed` (tags, digests, one probe per immutable reference
in every registry, the git tag, the working tree) and runs the steps in order, stopping at
the first failure.

Rules:

- An immutable reference (`<repo>:X.Y.Z[-rN|-rcN]`, image or kit) is written at most once.
  Only a probe that answered a clear not-found (`Absent`) allows a write; a probe error
  (`Unknown`), a missing probe, or a tag listing that disagrees with the probe refuses
  the whole release with exit 2 (fail closed).
- Image absent everywhere: BUILD once, PUSH_IMAGE to every registry (one build, so one
  digest). Image present in some registries: COPY_IMAGE that digest to the others (a
  heal, never a rebuild). Present everywhere, kit too: refused, exit 2.
- A kit is published in two shapes, each stamped per registry (its spec pins that
  registry's image by digest), then pushed where it is absent: the current shape (sbx
  0.42.1+) as `<kit>:X.Y.Z`, the legacy shape (sbx below 0.42.1) as
  `<kit>:X.Y.Z-sbx-below-0.42.1` (`kit_tag`). Floating tags name the current shape only.
- Commit point: every immutable reference (images and kits, every registry) is VERIFYed,
  then floating tags move, kits before images. A plan that is refused never moves them.
- A dirty tree, a missing git tag (releases only) or a bad version refuses with exit 1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from bandkit.errors import BandkitError
from bandkit.image.facts import LEGACY_KIT_NAME
from bandkit.release import versions
from bandkit.release.versions import Version, VersionError

GIT_TAG_PREFIX = "band-sdk-v"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
KitShape = Literal["current", "legacy"]
KIT_SHAPES: tuple[KitShape, ...] = ("current", "legacy")
LEGACY_KIT_SUFFIX = f"-{LEGACY_KIT_NAME}"  # `X.Y.Z-sbx-below-0.42.1`: for sbx below 0.42.1


def kit_tag(tag: str, shape: KitShape) -> str:
    """The kit tag of version `tag` in `shape`."""
    return tag if shape == "current" else f"{tag}{LEGACY_KIT_SUFFIX}"


@dataclass(frozen=True)
class Present:
    """The reference resolves, to this manifest digest."""

    digest: str

    def __post_init__(self) -> None:
        if not _DIGEST.fullmatch(self.digest):
            raise ValueError(f"digest must be sha256:<64 lowercase hex>, got {self.digest!r}")


@dataclass(frozen=True)
class Absent:
    """A clear not-found (MANIFEST_UNKNOWN, NAME_UNKNOWN, HTTP 404): safe to write."""


@dataclass(frozen=True)
class Unknown:
    """Any other probe answer (auth, network, rate limit, tool missing): never safe to write."""

    error: str


Probe = Present | Absent | Unknown
ABSENT = Absent()


@dataclass(frozen=True)
class RegistryObserved:
    """One registry: its two repositories, tags present, and probes keyed by full reference."""

    image_repo: str
    kit_repo: str
    image_tags: Mapping[str, str] = field(default_factory=dict)  # tag -> manifest digest
    kit_tags: frozenset[str] = frozenset()
    probes: Mapping[str, Probe] = field(default_factory=dict)  # "<repo>:<tag>" -> outcome

    def image_ref(self, tag: str) -> str:
        return f"{self.image_repo}:{tag}"

    def kit_ref(self, tag: str, shape: KitShape = "current") -> str:
        return f"{self.kit_repo}:{kit_tag(tag, shape)}"


@dataclass(frozen=True)
class Observed:
    """Everything the planner looks at, keyed by registry name in publish order."""

    registries: Mapping[str, RegistryObserved]
    git_tag_present: bool
    tree_clean: bool


class StepKind(Enum):
    BUILD = "build"
    PUSH_IMAGE = "push-image"
    COPY_IMAGE = "copy-image"
    STAMP_KIT = "stamp-kit"
    PUSH_KIT = "push-kit"
    VERIFY = "verify"
    MOVE_FLOATING = "move-floating"


@dataclass(frozen=True)
class Step:
    """One action. `source` is what is copied, stamped from or re-tagged; `digest` if known;
    `shape` the spec shape a kit step is about (current or legacy)."""

    kind: StepKind
    ref: str
    reason: str
    registry: str | None = None
    source: str | None = None
    digest: str | None = None
    shape: KitShape = "current"


@dataclass(frozen=True)
class Plan:
    version: Version
    steps: tuple[Step, ...]
    skipped: tuple[str, ...] = ()

    def kinds(self) -> list[StepKind]:
        return [step.kind for step in self.steps]


class ReleaseRefused(BandkitError):
    """The release must not run. `exit_code`: 1 precondition, 2 immutability (fail closed).

    `partial` (when the version parsed) holds the writes that were decidable, for a dry
    run to show; it never contains VERIFY or MOVE_FLOATING, and is never to be run.
    """

    PRECONDITION = 1
    IMMUTABLE = 2

    def __init__(self, reasons: Sequence[str], exit_code: int, partial: Plan | None = None):
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)
        self.exit_code = exit_code
        self.partial = partial


def _clear(ref: str, probe: Probe | None, listed: bool, listed_digest: str | None) -> Probe:
    """The probe if it is safe to act on, else an `Unknown` that says why (fail closed)."""
    closed = "fail closed: only a clear not-found counts as absent"
    if probe is None:
        return Unknown(f"{ref} was not probed; {closed}")
    if isinstance(probe, Unknown):
        return Unknown(f"probe of {ref} failed ({probe.error}); {closed}")
    if isinstance(probe, Absent) and listed:
        return Unknown(f"{ref} is listed in the registry's tags but probed absent; {closed}")
    if isinstance(probe, Present) and listed_digest not in (None, probe.digest):
        return Unknown(f"{ref} is listed as {listed_digest} but probed as {probe.digest}")
    return probe


def _preconditions(version: str, observed: Observed) -> tuple[Version | None, list[str]]:
    problems: list[str] = []
    target: Version | None = None
    try:
        target = versions.parse(version)
    except VersionError as exc:
        problems.append(str(exc))
    if not observed.tree_clean:
        problems.append("the working tree has uncommitted changes: commit or stash them first")
    if target is not None and not target.is_prerelease and not observed.git_tag_present:
        problems.append(f"git tag {GIT_TAG_PREFIX}{target.base} is missing: tag the release first")
    if not observed.registries:
        problems.append("no registry to publish to")
    return target, problems


def _probe(ref: str, r: RegistryObserved, tag: str, listed: Mapping[str, str | None]) -> Probe:
    return _clear(ref, r.probes.get(ref), tag in listed, listed.get(tag))


def _writes(
    tag: str, observed: Observed, refusals: list[str]
) -> tuple[list[Step], list[str], str | None]:
    """BUILD/PUSH/COPY/STAMP/PUSH_KIT steps, "kept" notes and the image digest if known.

    Problems are appended to `refusals`; the steps returned are those still decidable.
    """
    regs = observed.registries
    images = {n: _probe(r.image_ref(tag), r, tag, dict(r.image_tags)) for n, r in regs.items()}
    kits = {
        (n, shape): _probe(r.kit_ref(tag, shape), r, kit_tag(tag, shape), dict.fromkeys(r.kit_tags))
        for n, r in regs.items()
        for shape in KIT_SHAPES
    }
    refusals += [p.error for p in (*images.values(), *kits.values()) if isinstance(p, Unknown)]
    if any(isinstance(p, Unknown) for p in images.values()):
        return [], [], None  # neither build nor copy can be decided
    present = {n: p.digest for n, p in images.items() if isinstance(p, Present)}
    if len(set(present.values())) > 1:
        found = ", ".join(f"{n}: {d}" for n, d in present.items())
        refusals.append(f"registries disagree on image {tag} ({found}); fail closed")
        return [], [], None
    for (n, shape), p in kits.items():
        if isinstance(p, Present) and n not in present:
            refusals.append(
                f"kit {regs[n].kit_ref(tag, shape)} exists but image {regs[n].image_ref(tag)} "
                "does not; fail closed: the kit's pinned digest cannot be checked"
            )
    digest = next(iter(present.values()), None)
    if len(present) == len(regs) and all(isinstance(p, Present) for p in kits.values()):
        refusals.append(
            f"{tag} is already published in every registry (image {digest}); immutable "
            "references are never overwritten: publish a new version instead"
        )
    steps: list[Step] = []
    if digest is None:
        steps.append(Step(StepKind.BUILD, f"image {tag}", "absent everywhere: build once"))
        steps += [
            Step(StepKind.PUSH_IMAGE, r.image_ref(tag), "absent: push the build", n)
            for n, r in regs.items()
        ]
    else:
        src = regs[next(iter(present))].image_repo
        reason = f"heal: copy the digest from {src}, no rebuild"
        steps += [
            Step(StepKind.COPY_IMAGE, r.image_ref(tag), reason, n, f"{src}@{digest}", digest)
            for n, r in regs.items()
            if n not in present
        ]
    missing = [key for key, p in kits.items() if isinstance(p, Absent)]
    for n, shape in missing:  # local work first: every kit is stamped before any is pushed
        pin = f"{regs[n].image_repo}@{digest or '<pushed digest>'}"
        ref = regs[n].kit_ref(tag, shape)
        why = f"pin the {shape} spec to {pin}"
        steps.append(Step(StepKind.STAMP_KIT, ref, why, n, pin, digest, shape))
    steps += [
        Step(StepKind.PUSH_KIT, regs[n].kit_ref(tag, shape), "absent: push the stamped kit", n,
             shape=shape)
        for n, shape in missing
    ]  # fmt: skip
    kept = [f"{regs[n].image_ref(tag)}: present ({d}), kept" for n, d in present.items()]
    kept += [
        f"{regs[n].kit_ref(tag, sh)}: present, kept" for n, sh in kits if (n, sh) not in missing
    ]
    return steps, kept, digest


def _verify(tag: str, observed: Observed, digest: str | None) -> list[Step]:
    why = "commit point: must resolve before any floating tag moves"
    steps: list[Step] = []
    for n, r in observed.registries.items():
        steps.append(Step(StepKind.VERIFY, r.image_ref(tag), why, n, digest=digest))
        steps += [
            Step(StepKind.VERIFY, r.kit_ref(tag, shape), why, n, shape=shape)
            for shape in KIT_SHAPES
        ]
    return steps


def _floating(target: Version, observed: Observed, move: bool) -> tuple[list[Step], list[str]]:
    if not move:
        return [], ["floating tags left alone: moving them was not requested"]
    if target.is_prerelease:
        return [], [f"floating tags left alone: {target} is a pre-release"]
    regs = observed.registries
    existing = [t for r in regs.values() for t in (*r.image_tags, *r.kit_tags)]
    moves = versions.floating_tags(target, existing)
    releases = [v for v in map(versions.try_parse, existing) if v and not v.is_prerelease]
    skipped = []
    for name in (str(target.major), versions.LATEST):
        if name not in moves:
            scope = [v for v in releases if name == versions.LATEST or v.major == target.major]
            skipped.append(f"{name}: not moved, newer {max(scope)} is present (stale-move guard)")
    tag = str(target)
    steps: list[Step] = []
    for kit_pass in (True, False):  # every kit (the current shape's) first, then the images
        for n, r in regs.items():
            ref = r.kit_ref if kit_pass else r.image_ref
            for name in moves:
                steps.append(
                    Step(StepKind.MOVE_FLOATING, ref(name), f"re-tag to {tag}", n, ref(tag))
                )
    return steps, skipped


def plan(version: str, observed: Observed, *, move_floating: bool = True) -> Plan:
    """Decide the publish of `version`, or raise ReleaseRefused listing every problem found
    (exit 2 if any is about immutability, else 1)."""
    target, problems = _preconditions(version, observed)
    if target is None:
        raise ReleaseRefused(problems, ReleaseRefused.PRECONDITION)
    tag = str(target)
    refusals: list[str] = []
    writes, kept, digest = (
        _writes(tag, observed, refusals) if observed.registries else ([], [], None)
    )
    if problems or refusals:
        code = ReleaseRefused.IMMUTABLE if refusals else ReleaseRefused.PRECONDITION
        reasons = refusals + problems
        partial = Plan(target, tuple(writes), tuple(f"refused: {r}" for r in reasons))
        raise ReleaseRefused(reasons, code, partial)
    floating, skipped = _floating(target, observed, move_floating)
    steps = (*writes, *_verify(tag, observed, digest), *floating)
    return Plan(target, steps, tuple(kept + skipped))


def render(plan: Plan) -> str:
    """The plan as a table (reference, action, reason) for `--dry-run`, then skip notes."""
    rows = [("reference", "action", "reason")]
    rows += [(s.ref, s.kind.value, s.reason) for s in plan.steps]
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"release plan for {plan.version}: {len(plan.steps)} step(s)"]
    lines += [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}".rstrip() for a, b, c in rows]
    if plan.skipped:
        lines.append("skipped:")
        lines += [f"  - {note}" for note in plan.skipped]
    return "\n".join(lines)
