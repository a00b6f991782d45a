"""BAND_LOG_* parsing, pinned value for value to band-sdk's own `LogSettings` as the
upstream launcher builds it (styles pinned to standard, `for_application()`, then the
logging request's rotation rule)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from launcher.errors import LauncherError, Phase
from launcher.logconfig import LogConfig, LogVar, read_log_config

CASES: list[dict[str, str]] = [
    {},
    {"BAND_LOG_LEVEL": "debug"},
    {"BAND_LOG_LEVEL": "Warn"},
    {"BAND_LOG_LEVEL": "fatal"},
    {"BAND_LOG_LEVEL": "notset"},
    {"BAND_LOG_LEVEL": "\u0131nfo"},  # dotless i: str.upper() makes it INFO, in both
    {"BAND_LOG_LEVEL": "10"},
    {"BAND_LOG_LEVEL": " INFO"},
    {"BAND_LOG_LEVEL": "loud"},
    {"BAND_LOG_LEVEL": ""},
    {"band_log_level": "error"},
    {"Band_Log_Stream": "STDOUT"},
    {"BAND_LOG_ROOT_LEVEL": "error"},
    {"BAND_LOG_ROOT_LEVEL": "", "BAND_LOG_LEVEL": "debug"},
    {"BAND_LOG_ROOT_LEVEL": "chatty"},
    {"BAND_LOG_STREAM": "stdout"},
    {"BAND_LOG_STREAM": "file"},
    {"BAND_LOG_STREAM": " stdout"},
    {"BAND_LOG_FILE": "/tmp/x/launch.log"},
    {"BAND_LOG_FILE": "~/logs//a.log"},
    {"BAND_LOG_FILE": "relative/b.log"},
    {"BAND_LOG_FILE_LEVEL": "debug"},
    {"BAND_LOG_FILE_LEVEL": "nope"},
    {"BAND_LOG_MAX_BYTES": "1000", "BAND_LOG_BACKUPS": "3"},
    {"BAND_LOG_MAX_BYTES": "100", "BAND_LOG_BACKUPS": "0"},
    {"BAND_LOG_MAX_BYTES": "0", "BAND_LOG_BACKUPS": "0"},
    {"BAND_LOG_BACKUPS": "-2"},
    {"BAND_LOG_BACKUPS": "abc"},
    {"BAND_LOG_CONSOLE_STYLE": "json", "BAND_LOG_FILE_STYLE": "bogus"},  # pinned: ignored
    {"BAND_LOG_OVERRIDES": '{"httpx": "warning", "filelock": "DEBUG"}'},
    {"BAND_LOG_OVERRIDES": '{"a": "info", "a": "debug"}'},
    {"BAND_LOG_OVERRIDES": "null"},
    {"BAND_LOG_OVERRIDES": " {} "},
    {"BAND_LOG_OVERRIDES": "not json"},
    {"BAND_LOG_OVERRIDES": "[]"},
    {"BAND_LOG_OVERRIDES": '"x"'},
    {"BAND_LOG_OVERRIDES": '{"httpx": 10}'},
    {"BAND_LOG_OVERRIDES": '{"httpx": null}'},
    {"BAND_LOG_OVERRIDES": '{"": "INFO"}'},
    {"BAND_LOG_OVERRIDES": '{"a": "bad"}'},
    {"BAND_LOG_UNKNOWN": "whatever"},
]

INTS = [
    "0", "100", " 100 ", "\t7\n", "\u00a07", "7\u2003", "+5", "-0", "-1", "01", "1_000",
    "1__0", "_1", "1_", "+_1", "1.0", "1.00", "-0.0", "1_000.0", "1.", ".0", "1.5",
    "1.000_0", "1e3", "0x10", "true", "\uff11\uff10\uff10", "\u0663", "1 0", "9" * 30,
    "inf", "-", "+",
]  # fmt: skip


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.upper().startswith("BAND_"):
            monkeypatch.delenv(key)


def upstream(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What band-sdk's LogSettings makes of `env` in the upstream launcher; None = refused."""
    from band.config.logs import LogSettings
    from band.logging_config import FormatStyle, LoggingStyle

    _clear(monkeypatch)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        settings = LogSettings.create(
            log_console_style=LoggingStyle.STANDARD, log_file_style=LoggingStyle.STANDARD
        ).for_application()
        settings.build_config(
            fmt="{asctime} {name} {levelname} {message}", fmt_style=FormatStyle.BRACE
        )
    except Exception:  # ValidationError, SettingsError, ValueError: all refusals
        return None
    return {
        "level": settings.log_level,
        "root": settings.log_root_level,
        "file": settings.log_file,
        "file_level": settings.log_file_level,
        "max_bytes": settings.log_max_bytes,
        "backups": settings.log_backups,
        "stream": settings.log_stream.value,
        "overrides": settings.log_overrides,
    }


def ours(env: dict[str, str]) -> dict[str, Any] | None:
    try:
        config = read_log_config(env)
    except LauncherError as exc:
        refusal = exc
    else:
        refusal = None
    if refusal is not None:
        assert refusal.phase is Phase.CONFIG
        assert "\n" not in str(refusal)
        return None
    return {
        "level": config.level,
        "root": config.effective_root_level,
        "file": Path(config.file) if config.file else None,
        "file_level": config.file_level,
        "max_bytes": config.max_bytes,
        "backups": config.backups,
        "stream": config.stream,
        "overrides": config.overrides,
    }


@pytest.mark.parametrize("env", CASES, ids=[str(i) for i in range(len(CASES))])
def test_same_values_and_refusals_as_log_settings(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ours(env) == upstream(env, monkeypatch)


@pytest.mark.parametrize("var", [LogVar.MAX_BYTES, LogVar.BACKUPS])
def test_integers_parse_like_pydantic(var: LogVar, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261130)  # noqa: S311 - a reproducible fuzz, not a secret
    alphabet = "0123456789_.+- \te1"
    fuzz = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(600)]
    for value in INTS + fuzz:
        env = {var.value: value}
        assert ours(env) == upstream(env, monkeypatch), value


def test_messages_name_the_variable_and_the_rule() -> None:
    with pytest.raises(LauncherError) as bad_level:
        read_log_config({"BAND_LOG_LEVEL": "loud"})
    assert str(bad_level.value) == (
        "[config] BAND_LOG_LEVEL must be a logging level name "
        "(DEBUG, INFO, WARNING, ERROR, CRITICAL), got 'loud'"
    )
    with pytest.raises(
        LauncherError, match=r"^\[config\] BAND_LOG_STREAM must be stderr or stdout"
    ):
        read_log_config({"BAND_LOG_STREAM": "file"})
    with pytest.raises(LauncherError, match=r"BAND_LOG_BACKUPS must be at least 1 when"):
        read_log_config({"BAND_LOG_MAX_BYTES": "10", "BAND_LOG_BACKUPS": "0"})
    with pytest.raises(LauncherError, match=r"BAND_LOG_OVERRIDES\['httpx'\] must be a logging"):
        read_log_config({"BAND_LOG_OVERRIDES": '{"httpx": "LOUD"}'})
    long = "x" * 500
    with pytest.raises(LauncherError) as shown:
        read_log_config({"BAND_LOG_MAX_BYTES": long})
    assert len(str(shown.value)) < 120  # a long value is cut, the line stays short


def test_levels_for_console_file_and_loggers() -> None:
    plain = LogConfig(level="WARNING")
    assert (plain.logger_level, plain.pin_handlers, plain.effective_root_level) == (
        "WARNING",
        False,
        "WARNING",
    )
    verbose_file = LogConfig(level="WARNING", file_level="DEBUG", root_level="ERROR")
    assert (verbose_file.logger_level, verbose_file.pin_handlers) == ("DEBUG", True)
    assert verbose_file.effective_root_level == "ERROR"
    quiet_file = LogConfig(level="DEBUG", file_level="ERROR")
    assert (quiet_file.logger_level, quiet_file.pin_handlers) == ("DEBUG", True)
    assert not LogConfig(level="WARN", file_level="WARNING").pin_handlers  # same value
