"""What a finished publish tells the workflow: `dist/release.json` and `$GITHUB_OUTPUT`.

The contract the release workflows read (`.github/workflows/release.yml`, `rebuild.yml`):

- `dist/release.json` (0644, atomic): `version`, `digest` (the image index digest, the
  same in every registry), `subject` (the GHCR image repository, no tag: the attestation is
  pushed beside it), `images` and `kits` (repository → digest of the current-shape kit
  `X.Y.Z`), `legacy_kits` (repository → digest of `X.Y.Z-sbx-below-0.42.1`).
- under GitHub Actions (`GITHUB_OUTPUT` names a file), the lines `digest=...`,
  `subject=...` and `version=...` are appended to it.

Nothing is written when nothing was published (a dry run, a refusal, a failed step), so
an attestation step gated on `digest` never runs on a half release.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from bandkit.fsio import write_atomic
from bandkit.image.facts import REPO_ROOT
from bandkit.release.settings import Settings

RECORD = REPO_ROOT / "dist" / "release.json"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
SUBJECT_REGISTRY = "ghcr"


def facts(
    settings: Settings,
    version: str,
    digest: str,
    kits: Mapping[str, str],
    legacy_kits: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """The record of one published version (pure)."""
    if not DIGEST.fullmatch(digest):
        raise ValueError(f"not an image digest: {digest!r}")
    return {
        "version": version,
        "digest": digest,
        "subject": settings.target(SUBJECT_REGISTRY).image_repo,
        "images": {t.image_repo: digest for t in settings.targets},
        "kits": dict(sorted(kits.items())),
        "legacy_kits": dict(sorted((legacy_kits or {}).items())),
    }


def _output_lines(record: Mapping[str, object]) -> str:
    lines = [f"{key}={record[key]}" for key in ("digest", "subject", "version")]
    if any("\n" in line or "\r" in line for line in lines):
        raise ValueError("a release fact holds a line break")
    return "".join(f"{line}\n" for line in lines)


def write(
    record: Mapping[str, object],
    *,
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Write the record file, then append the workflow outputs when running in Actions."""
    path = path or RECORD
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o644)
    output = (os.environ if environ is None else environ).get("GITHUB_OUTPUT", "")
    if output:
        with open(output, "a", encoding="utf-8") as fh:
            fh.write(_output_lines(record))
    return path
