"""The README's fleet render as written, in a fresh clone: the base it writes builds with
the kubectl the dev group installs (this session's, beside its Python: a user's `uv run`
in the clone installs no dev tools), and the keys it writes are private."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.support.readme import readme_block, run

pytestmark = pytest.mark.e2e


def test_the_fleet_render_as_written(clone: Path) -> None:
    (line,) = readme_block("Kubernetes, rendered and checked offline")
    done = run(line, clone)
    assert "fleet.render: 3 agent(s)" in done.stdout
    out = clone / "dist" / "fleet"
    kubectl = Path(sys.executable).with_name("kubectl")
    built = run(f"{kubectl} kustomize dist/fleet", clone).stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(built) if d]
    assert kinds.count("Sandbox") == 3
    assert kinds.count("Secret") == 6  # per agent: its key, the sidecar's client token
    assert (out / "keys").stat().st_mode & 0o777 == 0o700
    status = run("git status --porcelain", clone).stdout
    assert status == "", status  # dist/ and the keys stay out of git
