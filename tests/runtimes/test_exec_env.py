"""Runtime `exec` env values never reach a CLI's argv (docker: its environment; sbx: a file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker import DockerRuntime
from bandkit.runtimes.sbx import SbxRuntime

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


def test_sbx_exec_env_values_go_through_a_0600_env_file_removed_afterwards(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.json"
    fake = tmp_path / "sbx"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, stat, sys\n"
        "args = sys.argv[1:]\n"
        "path = args[args.index('--env-file') + 1]\n"
        f"open({str(record)!r}, 'w').write(json.dumps({{'argv': args, 'path': path,"
        " 'mode': stat.S_IMODE(os.stat(path).st_mode), 'text': open(path).read()}))\n"
    )
    fake.chmod(0o755)
    runtime = SbxRuntime(binary=str(fake))

    result = runtime.exec("box-1", ["env"], env={"BAND_API_KEY": CANARY, "MODE": "a=b"})

    seen = json.loads(record.read_text())
    assert result.returncode == 0
    assert CANARY not in " ".join(seen["argv"])
    assert seen["argv"][-2:] == ["box-1", "env"]
    assert seen["mode"] == 0o600
    assert seen["text"] == f"BAND_API_KEY={CANARY}\nMODE=a=b\n"
    assert not Path(seen["path"]).exists()


def test_sbx_exec_refuses_a_multiline_env_value_without_running(tmp_path: Path) -> None:
    runtime = SbxRuntime(binary=str(tmp_path / "never-run"))
    with pytest.raises(SandboxError, match="single-line") as caught:
        runtime.exec("box-1", ["env"], env={"BAND_API_KEY": f"{CANARY}\nX=1"})
    assert CANARY not in str(caught.value)
