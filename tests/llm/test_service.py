"""`invoke llm.up|status|logs|down` for real (a detached stub), and `python -m bandkit.llm`."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from bandkit import processes
from tests.llm.conftest import SCRIPTS

REPO_ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO_ROOT,
        check=False,
    )


def _keys(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {name: value for name, value in pairs if not name.startswith("#")}


def _up(run_dir: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    started = invoke("llm.up", "--script", str(SCRIPTS), "--run-dir", str(run_dir))
    assert started.returncode == 0, started.stderr
    assert "llm.up: started" in started.stdout
    return started, json.loads((run_dir / "llm.json").read_text())


def _secrets(run_dir: Path) -> list[str]:
    return [*_keys(run_dir / "llm-keys").values(), (run_dir / "llm-operator-key").read_text()]


def _never_shown(run_dir: Path, outputs: list[subprocess.CompletedProcess[str]]) -> None:
    files = ("llm.json", "llm.log", "llm-requests.jsonl")
    for text in [o.stdout + o.stderr for o in outputs] + [(run_dir / n).read_text() for n in files]:
        for secret in _secrets(run_dir):
            assert secret.strip() not in text


def test_up_serves_its_keys_and_pages_and_a_second_up_is_idempotent(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        started, record = _up(run_dir)
        for name in ("llm.json", "llm-keys", "llm-operator-key", "llm.log", "llm-requests.jsonl"):
            assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o600, name
        operator = (run_dir / "llm-operator-key").read_text().strip()
        assert f"turns page: {record['url']}/login#token=" in started.stdout
        # Loopback is no credential: the pages want the operator key (or a login session).
        assert httpx.get(f"{record['url']}/_stub/turns", timeout=5).status_code == 401
        with_key = {"x-bandkit-operator-key": operator}
        assert httpx.get(f"{record['url']}/_stub/turns", headers=with_key).status_code == 200
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
        assert f"ANTHROPIC_BASE_URL={record['url']}" in started.stdout
        assert f"OPENAI_BASE_URL={record['url']}/v1" in started.stdout
        keys = _keys(run_dir / "llm-keys")
        assert set(keys) == {"anthropic", "openai"}

        # The stub answers the real SDKs with the keys from the key file, and only those.
        claude = anthropic.Anthropic(
            base_url=record["url"], api_key=keys["anthropic"], max_retries=0, timeout=10
        )
        reply = claude.messages.create(
            model="stub-pm", max_tokens=16, messages=[{"role": "user", "content": "hello"}]
        )
        assert reply.content[0].text.startswith("Hello from pm, turn 1.")  # type: ignore[union-attr]
        gpt = openai.OpenAI(
            base_url=f"{record['url']}/v1", api_key="proxy-managed", max_retries=0, timeout=10
        )
        with pytest.raises(openai.AuthenticationError):
            gpt.responses.create(model="stub-dev", input="hi")

        again = invoke("llm.up", "--script", str(SCRIPTS), "--run-dir", str(run_dir))
        assert "already running" in again.stdout
        other = invoke("llm.up", "--script", str(SCRIPTS / "pm.yaml"), "--run-dir", str(run_dir))
        assert other.returncode == 1
        assert "llm.down` first" in other.stderr
        _never_shown(run_dir, [started, again, other])
    finally:
        stopped = invoke("llm.down", "--run-dir", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr


def test_status_logs_then_down_and_down_again(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    record = None
    try:
        started, record = _up(run_dir)
        gpt = openai.OpenAI(
            base_url=f"{record['url']}/v1", api_key="proxy-managed", max_retries=0, timeout=10
        )
        with pytest.raises(openai.AuthenticationError):
            gpt.responses.create(model="stub-dev", input="hi")

        status = invoke("llm.status", "--run-dir", str(run_dir))
        assert status.returncode == 0
        assert f"running, pid {record['pid']}" in status.stdout
        assert "health: ok; agents architect, dev, pm; 1 requests" in status.stdout
        links = [line for line in status.stdout.splitlines() if "/login#token=" in line]
        assert len(links) == 1
        assert links[0] not in started.stdout  # a fresh one-time link each time

        logs = invoke("llm.logs", "--run-dir", str(run_dir), "--lines", "20")
        assert "serving on" in logs.stdout
        assert "CUSTODY openai.responses" in logs.stdout
        requests = invoke("llm.logs", "--run-dir", str(run_dir), "--requests")
        statuses = [json.loads(line)["status"] for line in requests.stdout.splitlines()]
        assert statuses == [401]
        _never_shown(run_dir, [started, status, logs, requests])
    finally:
        stopped = invoke("llm.down", "--run-dir", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "llm.down: stopped pid" in stopped.stdout
    assert record is not None
    assert not processes.alive(record["pid"])  # a zombie counts as gone
    assert not (run_dir / "llm.json").exists()
    assert "not running" in invoke("llm.status", "--run-dir", str(run_dir)).stdout
    assert "not running (no run file)" in invoke("llm.down", "--run-dir", str(run_dir)).stdout


def test_up_refuses_a_bad_or_missing_script(tmp_path: Path) -> None:
    missing = invoke("llm.up", "--run-dir", str(tmp_path))
    assert missing.returncode == 1
    assert "llm.up: --script is required" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [{when: {message: '('}, reply: {text: x}}]\n")
    refused = invoke("llm.up", "--script", str(bad), "--run-dir", str(tmp_path / "run"))
    assert refused.returncode == 1
    assert "not a valid regular expression" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "run" / "llm.json").exists()


def test_foreground_banner_check_and_clean_stop(tmp_path: Path) -> None:
    check = subprocess.run(
        [sys.executable, "-m", "bandkit.llm", "--script", str(SCRIPTS), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )
    assert check.returncode == 0
    assert check.stdout.startswith("scripts ok: agents: architect")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bandkit.llm", "--script", str(SCRIPTS / "pm.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(9)]
        assert lines[0].startswith("http://127.0.0.1:")
        assert any(line.startswith("anthropic key: sk-ant-stub-") for line in lines)
        url = lines[0].strip()
        generated = next(line.split(": ")[1].strip() for line in lines if "anthropic key" in line)
        claude = anthropic.Anthropic(base_url=url, api_key=generated, max_retries=0, timeout=10)
        reply = claude.messages.create(
            model="any-model", max_tokens=8, messages=[{"role": "user", "content": "hello"}]
        )
        assert reply.content[0].type == "text"  # the only script answers any model
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert generated not in err  # printed on stdout only, never logged
