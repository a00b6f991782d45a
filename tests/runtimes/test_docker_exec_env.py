"""`DockerRuntime.exec` passes env values through docker's environment, never its argv."""

from __future__ import annotations

import json
from pathlib import Path

from bandkit.runtimes.docker import DockerRuntime

CANARY = "canary-exec-env-7f3a9c"  # a planted secret value


def test_exec_env_values_reach_docker_by_environment_not_argv(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps("
        "{'argv': sys.argv[1:], 'value': os.environ.get('BAND_API_KEY')}))\n"
    )
    fake.chmod(0o755)
    runtime = DockerRuntime(tmp_path / "run", binary=str(fake))

    result = runtime.exec("box-1", ["true"], env={"BAND_API_KEY": CANARY})

    seen = json.loads(record.read_text())
    assert result.returncode == 0
    assert seen["argv"] == ["exec", "--user", "1000", "--env", "BAND_API_KEY", "box-1", "true"]
    assert CANARY not in " ".join(seen["argv"])
    assert seen["value"] == CANARY
