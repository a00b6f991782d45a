"""`main()` with the BAND_LOG_* settings: level, stream, file sink, file level, rotation,
overrides, and a bad value as one clean `[config]` line. The launch stops at the sync
phase (the box has no uv.lock), after launcher.log has started."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

import pytest

from launcher import identity
from launcher.run import main
from tests.launcher.fakes import CANARY, Box, base_env

TOUCHED = ("launcher", "band", "filelock")


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in TOUCHED}
    monkeypatch.setattr(identity, "current_uid", lambda: 1000)
    monkeypatch.delenv("BAND_LOG_LEVEL", raising=False)
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


def launch(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str
) -> tuple[int, str, str]:
    box.write(box.config())
    for key, value in base_env(box, OPENAI_API_KEY=CANARY, **env).items():
        monkeypatch.setenv(key, value)
    code = main([])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert CANARY not in out + err + box.log_text()
    return code, out, err


def test_defaults_console_on_stderr_and_launcher_log(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = launch(box, monkeypatch, capsys)
    assert code == 1
    assert out == ""
    assert "phase identity" in err
    assert "[sync]" in err
    assert "phase identity" in box.log_text()
    stamp = err.splitlines()[0].split(" ")[0]
    assert time.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z")  # ISO-8601, as upstream


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"BAND_LOG_LEVEL": "loud"}, "BAND_LOG_LEVEL must be a logging level name"),
        ({"band_log_stream": "file"}, "BAND_LOG_STREAM must be stderr or stdout"),
        ({"BAND_LOG_MAX_BYTES": "1e3"}, "BAND_LOG_MAX_BYTES must be a whole number"),
        ({"BAND_LOG_MAX_BYTES": "9", "BAND_LOG_BACKUPS": "0"}, "BAND_LOG_BACKUPS must be at"),
        ({"BAND_LOG_OVERRIDES": "{oops"}, "BAND_LOG_OVERRIDES must be a JSON object"),
        ({"BAND_LOG_FILE_LEVEL": "x"}, "BAND_LOG_FILE_LEVEL must be a logging level name"),
    ],
)
def test_a_bad_setting_is_one_config_line_and_exit_1(
    box: Box,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    fragment: str,
) -> None:
    code, out, err = launch(box, monkeypatch, capsys, **env)
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert f"launch failed: [config] {fragment}" in lines[0]
    assert not (box.home / "logs").exists()  # stopped before any phase ran


def test_stream_stdout(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = launch(box, monkeypatch, capsys, BAND_LOG_STREAM="STDOUT")
    assert code == 1
    assert err == ""
    assert "phase identity" in out
    assert "[sync]" in out


def test_level_applies_to_console_and_file(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = launch(box, monkeypatch, capsys, BAND_LOG_LEVEL="warning")
    assert code == 1
    assert "phase identity" not in err
    assert "[sync]" in err
    assert "INFO" not in box.log_text()
    assert "[sync]" in box.log_text()


def test_a_more_verbose_file_level_reaches_files_only(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = box.root / "extra" / "deeper" / "band.log"
    code, _out, err = launch(
        box,
        monkeypatch,
        capsys,
        BAND_LOG_LEVEL="WARNING",
        BAND_LOG_FILE_LEVEL="debug",
        BAND_LOG_FILE=str(extra),
    )
    assert code == 1
    assert "INFO" not in err
    for text in (box.log_text(), extra.read_text()):
        assert "phase identity" in text  # logged before launcher.log existed: replayed
        assert "phase paths" in text  # BAND_LOG_FILE keeps receiving after launcher.log
        assert "[sync]" in text


def test_band_log_file_is_created_owner_only(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = box.root / "new" / "dir" / "band.log"
    launch(box, monkeypatch, capsys, BAND_LOG_FILE=str(extra))
    assert extra.stat().st_mode & 0o777 == 0o600
    assert (box.root / "new").stat().st_mode & 0o777 == 0o700
    assert (box.root / "new" / "dir").stat().st_mode & 0o777 == 0o700
    # An existing file keeps the mode its owner chose (as the SDK does).
    extra.chmod(0o640)
    launch(box, monkeypatch, capsys, BAND_LOG_FILE=str(extra))
    assert extra.stat().st_mode & 0o777 == 0o640
    assert extra.read_text().count("phase identity") == 2


def test_band_log_file_may_be_launcher_log_itself(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = box.home / "logs" / "launcher.log"
    launch(box, monkeypatch, capsys, BAND_LOG_FILE=str(target))
    assert box.log_text().count("phase identity") == 1  # no line twice


def test_an_unopenable_band_log_file_is_a_config_error(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = box.root / "a-file"
    blocker.write_text("")
    code, _out, err = launch(box, monkeypatch, capsys, BAND_LOG_FILE=str(blocker / "x.log"))
    assert code == 1
    assert len(err.splitlines()) == 1
    assert f"[config] cannot open BAND_LOG_FILE {blocker / 'x.log'}" in err


def test_rotation_applies_to_launcher_log(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(4):
        launch(box, monkeypatch, capsys, BAND_LOG_MAX_BYTES="300", BAND_LOG_BACKUPS="2")
    logs = box.home / "logs"
    names = sorted(p.name for p in logs.iterdir())
    assert names == ["launcher.log", "launcher.log.1", "launcher.log.2"]
    for path in logs.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path  # every generation owner-only
        assert path.stat().st_size <= 300 + 400  # one record may overshoot the cap


def test_overrides_set_per_logger_levels(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = launch(
        box, monkeypatch, capsys, BAND_LOG_OVERRIDES='{"launcher": "error", "filelock": "DEBUG"}'
    )
    assert code == 1
    assert "phase identity" not in err
    assert "[sync]" in err
    assert logging.getLogger("filelock").level == logging.DEBUG


def test_root_level_follows_the_level_unless_set(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    launch(box, monkeypatch, capsys, BAND_LOG_LEVEL="DEBUG")
    assert logging.getLogger().level == logging.DEBUG
    launch(box, monkeypatch, capsys, BAND_LOG_LEVEL="DEBUG", BAND_LOG_ROOT_LEVEL="error")
    assert logging.getLogger().level == logging.ERROR
    assert logging.getLogger("launcher").level == logging.DEBUG
    assert os.environ["BAND_LOG_ROOT_LEVEL"] == "error"


def test_check_validates_the_settings_but_writes_no_log_file(
    box: Box, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bandkit.runtimes.sdk_home import find_uv_binary

    extra = box.root / "never" / "band.log"
    (box.ws / "uv.lock").write_text("version = 1\n")
    box.write(box.config())
    env = base_env(
        box,
        BAND_LOG_FILE=str(extra),
        BAND_LOG_LEVEL="warning",
        BAND_LOG_MAX_BYTES="5000",
        BAND_LOG_OVERRIDES='{"httpx": "error"}',
        BAND_SDK_UV=str(find_uv_binary()),
    )
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["--check"]) == 0
    assert not (box.root / "never").exists()
    logs = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["logs"]]
    assert logs == [
        f"  logs         WARNING on stderr, root WARNING; WARNING to "
        f"{box.home / 'logs' / 'launcher.log'}, {extra}, rotated at 5000 bytes keeping 1; "
        "overrides httpx=ERROR"
    ]
    monkeypatch.setenv("BAND_LOG_STREAM", "nowhere")
    assert main(["--check"]) == 1
    assert "[config] BAND_LOG_STREAM must be stderr or stdout" in capsys.readouterr().err
