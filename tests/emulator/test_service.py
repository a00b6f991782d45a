"""`invoke platform.up|status|logs|down` for real: a detached emulator, a 0600 run file."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from bandkit import processes
from tests.emulator.support import REPO_ROOT, token_of


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )


def test_up_status_logs_down(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = invoke("platform.up", "--run-dir", str(run_dir))
    try:
        assert started.returncode == 0, started.stderr
        assert "started" in started.stdout
        record = json.loads((run_dir / "platform.json").read_text())
        for name in ("platform.json", "platform-user-key", "platform-state.json"):
            assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o600
        key = (run_dir / "platform-user-key").read_text().strip()
        assert f"BAND_REST_URL={record['rest_url']}" in started.stdout
        health = httpx.get(f"{record['rest_url']}/_emulator/health", headers={"x-api-key": key})
        assert health.json()["data"]["status"] == "ok"

        again = invoke("platform.up", "--run-dir", str(run_dir))
        assert "already running" in again.stdout
        assert json.loads((run_dir / "platform.json").read_text())["pid"] == record["pid"]

        status = invoke("platform.status", "--run-dir", str(run_dir))
        assert status.returncode == 0
        assert f"running, pid {record['pid']}" in status.stdout
        assert "health: ok" in status.stdout

        # Both print a one-time room-page link (a fresh one each time); it signs in once.
        links = [_login_link(out.stdout, record["rest_url"]) for out in (started, again, status)]
        tokens = [token_of(link) for link in links]
        assert len(set(tokens)) == 3
        signed = httpx.post(f"{record['rest_url']}/login", data={"token": tokens[-1]})
        assert signed.status_code == 303
        assert "httponly" in signed.headers["set-cookie"].lower()
        reused = httpx.post(f"{record['rest_url']}/login", data={"token": tokens[-1]})
        assert reused.status_code == 401

        logs = invoke("platform.logs", "--run-dir", str(run_dir), "--lines", "5")
        assert "serving on" in logs.stdout
        for output in (started, again, status, logs):
            assert key not in output.stdout + output.stderr
        assert key not in (run_dir / "platform.json").read_text()
        for token in tokens:  # printed for the person only: not in the log, not stored
            assert token not in (run_dir / "platform.log").read_text()
            assert token not in (run_dir / "platform.json").read_text()
            assert token not in logs.stdout
    finally:
        stopped = invoke("platform.down", "--run-dir", str(run_dir))
    assert stopped.returncode == 0
    assert f"stopped pid {record['pid']}" in stopped.stdout
    assert not (run_dir / "platform.json").exists()
    assert not processes.alive(record["pid"])  # a zombie counts as gone
    assert "not running" in invoke("platform.status", "--run-dir", str(run_dir)).stdout
    assert "no run file" in invoke("platform.down", "--run-dir", str(run_dir)).stdout


def _login_link(stdout: str, rest_url: str) -> str:
    line = next(x for x in stdout.splitlines() if x.startswith("room pages: "))
    link = line.removeprefix("room pages: ").split(" ", 1)[0]
    assert link.startswith(f"{rest_url}/login#token="), line
    return link


def test_stale_and_broken_run_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stale = {
        "pid": 2**22 + 7,
        "rest_url": "http://127.0.0.1:1",
        "ws_url": "ws://127.0.0.1:1",
        "user_key_file": "k",
        "state_file": "s",
        "log_file": "l",
        "started_at": "t",
    }
    (run_dir / "platform.json").write_text(json.dumps(stale))
    down = invoke("platform.down", "--run-dir", str(run_dir))
    assert "stale run file" in down.stdout
    (run_dir / "platform.json").write_text("{")
    broken = invoke("platform.status", "--run-dir", str(run_dir))
    assert broken.returncode == 1
    assert "platform.status: run file" in broken.stderr
    assert "Traceback" not in broken.stderr
    missing_log = invoke("platform.logs", "--run-dir", str(tmp_path / "empty"))
    assert missing_log.returncode == 1
    assert "platform.up` first" in missing_log.stderr
