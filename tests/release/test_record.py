"""The publish record and the workflow outputs: what release.yml and rebuild.yml read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bandkit.release import record
from bandkit.release.settings import from_config

SETTINGS = from_config(
    {
        "hub_image": "127.0.0.1:5001/band/image",
        "hub_kit": "127.0.0.1:5001/band/kit",
        "ghcr_image": "127.0.0.1:5002/band/image",
        "ghcr_kit": "127.0.0.1:5002/band/kit",
    }
)
DIGEST = "sha256:" + "ab" * 32


def test_the_record_names_the_ghcr_image_as_subject_and_one_digest_everywhere() -> None:
    legacy = {"127.0.0.1:5002/band/kit": "sha256:" + "ef" * 32}
    facts = record.facts(
        SETTINGS, "1.2.3", DIGEST, {"127.0.0.1:5002/band/kit": "sha256:" + "cd" * 32}, legacy
    )
    assert facts["subject"] == "127.0.0.1:5002/band/image"
    assert facts["legacy_kits"] == legacy
    assert facts["images"] == {
        "127.0.0.1:5001/band/image": DIGEST,
        "127.0.0.1:5002/band/image": DIGEST,
    }


def test_a_malformed_digest_is_never_recorded() -> None:
    with pytest.raises(ValueError, match="not an image digest"):
        record.facts(SETTINGS, "1.2.3", "sha256:short", {})


def test_the_file_and_the_github_outputs_carry_the_same_facts(tmp_path: Path) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=kept\n")
    path = record.write(
        record.facts(SETTINGS, "1.2.3-r1", DIGEST, {}),
        path=tmp_path / "dist" / "release.json",
        environ={"GITHUB_OUTPUT": str(out)},
    )
    written = json.loads(path.read_text())
    assert written["digest"] == DIGEST
    assert written["version"] == "1.2.3-r1"
    lines = out.read_text().splitlines()
    assert lines[0] == "earlier=kept"
    assert lines[1:] == [
        f"digest={DIGEST}",
        "subject=127.0.0.1:5002/band/image",
        "version=1.2.3-r1",
    ]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", lines[1].split("=", 1)[1])


def test_outside_actions_only_the_file_is_written(tmp_path: Path) -> None:
    path = record.write(
        record.facts(SETTINGS, "1.2.3", DIGEST, {}), path=tmp_path / "r.json", environ={}
    )
    assert path.stat().st_mode & 0o777 == 0o644
    assert list(tmp_path.iterdir()) == [path]
