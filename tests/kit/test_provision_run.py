"""Platform and user-key resolution for `kit.provision` (no network)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bandkit.emulator import service
from bandkit.kit import commands as provision_run
from bandkit.kit.provision import ProvisionError


def _record(tmp_path: Path, key_file: Path, pid: int = 4242) -> None:
    record = service.RunRecord(
        pid=pid,
        rest_url="http://127.0.0.1:5",
        ws_url="ws://127.0.0.1:5/api/v1/socket/websocket",
        user_key_file=str(key_file),
        state_file=str(tmp_path / "state.json"),
        log_file=str(tmp_path / "log"),
        started_at="2026-12-01T00:00:00Z",
    )
    (tmp_path / service.RUN_FILE).write_text(json.dumps(dataclasses.asdict(record)))


def test_platform_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAND_REST_URL", raising=False)
    monkeypatch.delenv("BAND_API_KEY_USER", raising=False)
    prod = provision_run.choose_platform("", tmp_path)
    assert (prod.rest_url, prod.local) == ("https://app.band.ai", False)
    key_file = tmp_path / "platform-user-key"
    key_file.write_text("local-user-key\n")
    _record(tmp_path, key_file)
    monkeypatch.setattr(service, "_is_our_emulator", lambda pid: pid == 4242)
    local = provision_run.choose_platform("", tmp_path)
    assert (local.rest_url, local.user_key, local.local) == (
        "http://127.0.0.1:5",
        "local-user-key",
        True,
    )
    monkeypatch.setenv("BAND_REST_URL", "https://staging.example")
    env = provision_run.choose_platform("", tmp_path)
    assert (env.rest_url, env.user_key, env.local) == ("https://staging.example", "", False)
    flag = provision_run.choose_platform("https://flag.example", tmp_path)
    assert flag.rest_url == "https://flag.example"


def test_a_dead_local_platform_is_a_clear_error_not_a_dead_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BAND_REST_URL", raising=False)
    _record(tmp_path, tmp_path / "key", pid=4243)
    monkeypatch.setattr(service, "_is_our_emulator", lambda pid: False)
    with pytest.raises(
        ProvisionError, match=r"not running; `uv run invoke platform.up` starts it again"
    ):
        provision_run.choose_platform("", tmp_path)


def test_an_unreadable_platform_record_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BAND_REST_URL", raising=False)
    (tmp_path / service.RUN_FILE).write_text("{not json")
    with pytest.raises(ProvisionError, match=r"unreadable .*remove it and retry"):
        provision_run.choose_platform("", tmp_path)


def test_user_key_from_env_prompt_or_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    choice = provision_run.PlatformChoice("https://x.example", "", local=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(ProvisionError, match="BAND_API_KEY_USER"):
        provision_run.user_key(choice)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    prompts: list[str] = []

    def prompt(text: str) -> str:
        prompts.append(text)
        return " typed-key \n"

    assert provision_run.user_key(choice, prompt=prompt) == "typed-key"
    assert prompts == ["Band user API key for https://x.example: "]
    with_env = provision_run.PlatformChoice("https://x.example", "env-key", local=False)
    assert provision_run.user_key(with_env, prompt=prompt) == "env-key"


def test_unprovision_without_manifest_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError, match="nothing to remove"):
        provision_run.unprovision("ghost", run_dir=tmp_path, api_key="k")


@pytest.mark.parametrize("name", ["../..", "Bad_Name", "", "a/b"])
def test_a_bad_name_is_refused_before_any_path_is_made(tmp_path: Path, name: str) -> None:
    run_dir = tmp_path / "run"
    for call in (
        lambda: provision_run.main_unprovision(name=name, rest_url="http://x", run_dir=run_dir),
        lambda: provision_run.main_ping(name=name, rest_url="http://x", run_dir=run_dir, timeout=1),
    ):
        with pytest.raises(ProvisionError, match="invalid sandbox name"):
            call()
    assert not run_dir.exists()
