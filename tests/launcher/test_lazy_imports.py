"""Start-up cost: the fast path imports neither pydantic nor filelock nor band."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.launcher.fakes import Box, base_env

PROBE = textwrap.dedent(
    """
    import json, sys
    import launcher.identity
    launcher.identity.current_uid = lambda: 1000
    from launcher.environment import LauncherEnv
    from launcher.launch import resolve_launch
    from launcher.sync import plan_sync
    launch = resolve_launch(LauncherEnv.from_environ())
    plan = plan_sync(launch)
    loaded = {m.split(".")[0] for m in sys.modules}
    heavy = sorted(loaded & {"pydantic", "filelock", "band", "yaml"})
    print(json.dumps({"revalidated": launch.config_revalidated, "heavy": heavy}))
    """
)


def _probe(box: Box) -> dict[str, object]:
    import json

    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=base_env(box, PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_a_changed_config_loads_pydantic_an_unchanged_one_does_not(box: Box) -> None:
    (box.ws / "uv.lock").write_text("version = 1\n")
    box.write(box.config())
    first = _probe(box)
    assert first == {"revalidated": True, "heavy": ["pydantic", "yaml"]}

    from launcher.config import read_document
    from launcher.schema import WorkspaceModel  # noqa: F401 - the schema the stamp vouches for
    from launcher.stamp import schema_fingerprint, write_stamp

    digest = read_document(box.ws / "band.yaml").digest
    write_stamp(Path(box.home / "state"), {"config_sha256": digest, "schema": schema_fingerprint()})
    second = _probe(box)
    assert second == {"revalidated": False, "heavy": ["yaml"]}
