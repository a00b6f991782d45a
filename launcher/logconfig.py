"""The SDK's `BAND_LOG_*` logging settings, read the way the upstream launcher reads them.

Upstream's launcher builds band-sdk's `LogSettings` (pydantic-settings: prefix `BAND_`,
names case-insensitive, empty values ignored) with the console and file styles pinned
to `standard`, then `for_application()`. `LogSettings` lives in `band.config.logs`, so
importing it imports the whole `band` package: more than upstream's own launcher
modules cost (the bench measured 0.7-1.1x upstream's start with it). This module
re-states the same rules in plain Python instead; tests/launcher/test_logconfig.py
pins them to `LogSettings` value for value.

| variable | default | rule (as LogSettings) |
|---|---|---|
| BAND_LOG_LEVEL | INFO | a logging level name, any case |
| BAND_LOG_ROOT_LEVEL | = BAND_LOG_LEVEL | same (`for_application`: unset follows the level) |
| BAND_LOG_FILE | unset | a path (`~` expanded); an extra file sink |
| BAND_LOG_FILE_LEVEL | = BAND_LOG_LEVEL | a level name; file sinks only |
| BAND_LOG_MAX_BYTES | 0 | integer >= 0 (pydantic's lax int from text); > 0 rotates |
| BAND_LOG_BACKUPS | 1 | integer >= 0; must be >= 1 when BAND_LOG_MAX_BYTES > 0 |
| BAND_LOG_STREAM | stderr | stderr or stdout, any case |
| BAND_LOG_OVERRIDES | {} | JSON object: logger name -> level name |
| BAND_LOG_CONSOLE_STYLE, BAND_LOG_FILE_STYLE | standard | ignored: the launcher pins both |

A bad value is a `LauncherError(config, ...)` naming the variable and the rule.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from enum import StrEnum

from launcher.errors import LauncherError, Phase


class LogVar(StrEnum):
    LEVEL = "BAND_LOG_LEVEL"
    ROOT_LEVEL = "BAND_LOG_ROOT_LEVEL"
    FILE = "BAND_LOG_FILE"
    FILE_LEVEL = "BAND_LOG_FILE_LEVEL"
    MAX_BYTES = "BAND_LOG_MAX_BYTES"
    BACKUPS = "BAND_LOG_BACKUPS"
    STREAM = "BAND_LOG_STREAM"
    OVERRIDES = "BAND_LOG_OVERRIDES"
    CONSOLE_STYLE = "BAND_LOG_CONSOLE_STYLE"  # read by the SDK, pinned by the launcher
    FILE_STYLE = "BAND_LOG_FILE_STYLE"  # read by the SDK, pinned by the launcher


STREAMS = ("stderr", "stdout")
# Unicode White_Space, what pydantic-core trims around an integer (str.strip() differs).
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # noqa: E501
# pydantic-core's lax int: ASCII digits, optional sign, single underscores between
# digits, and an all-zero fraction ("10.0" is 10, "10." and "1e3" are not integers).
LAX_INT = r"([+-]?[0-9]+(?:_[0-9]+)*)(?:\.0+)?"
_SHOWN = 40


class LogConfig:
    """Validated settings; `root_level`/`file_level` None means "follow `level`".

    A plain class, not a dataclass: creating a dataclass costs about 1.5 ms at import,
    a visible share of the launcher's fast path.
    """

    __slots__ = (
        "backups",
        "file",
        "file_level",
        "level",
        "max_bytes",
        "overrides",
        "root_level",
        "stream",
    )

    def __init__(
        self,
        *,
        level: str = "INFO",
        root_level: str | None = None,
        file: str | None = None,
        file_level: str | None = None,
        max_bytes: int = 0,
        backups: int = 1,
        stream: str = "stderr",
        overrides: dict[str, str] | None = None,
    ) -> None:
        self.level = level
        self.root_level = root_level
        self.file = file
        self.file_level = file_level
        self.max_bytes = max_bytes
        self.backups = backups
        self.stream = stream
        self.overrides = dict(overrides or {})

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"LogConfig({fields})"

    @property
    def effective_root_level(self) -> str:
        return self.root_level or self.level

    @property
    def effective_file_level(self) -> str:
        return self.file_level or self.level

    @property
    def pin_handlers(self) -> bool:
        """File sinks at another level than the console: each handler keeps its own."""
        return level_value(self.effective_file_level) != level_value(self.level)

    @property
    def logger_level(self) -> str:
        """The launcher's (and band's) logger gate: the more verbose of console and file."""
        file_level = self.effective_file_level
        return self.level if level_value(self.level) <= level_value(file_level) else file_level


def level_value(name: str) -> int:
    return logging.getLevelNamesMapping()[name]


def _lookup(environ: Mapping[str, str], name: str) -> str:
    """Case-insensitive, exact case first; empty counts as unset (env_ignore_empty)."""
    if environ.get(name):
        return environ[name]
    lowered = name.lower()
    for key in sorted(environ):
        if key.lower() == lowered and environ[key]:
            return environ[key]
    return ""


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def _bad(var: str, rule: str, value: str | None = None) -> LauncherError:
    got = f", got {_shown(value)}" if value is not None else ""
    return LauncherError(Phase.CONFIG, f"{var} must be {rule}{got}")


def _level(var: str, value: str) -> str:
    name = value.upper()
    if name not in logging.getLevelNamesMapping():
        raise _bad(var, "a logging level name (DEBUG, INFO, WARNING, ERROR, CRITICAL)", value)
    return name


def _count(var: str, value: str) -> int:
    match = re.fullmatch(LAX_INT, value.strip(_WHITE_SPACE))
    if match is None:
        raise _bad(var, "a whole number", value)
    number = int(match.group(1))
    if number < 0:
        raise _bad(var, "0 or more", value)
    return number


def _overrides(value: str) -> dict[str, str]:
    import json

    var = LogVar.OVERRIDES
    try:
        data = json.loads(value)
    except ValueError:
        raise _bad(
            var, 'a JSON object of logger name to level, e.g. {"httpx": "WARNING"}'
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _bad(var, 'a JSON object of logger name to level, e.g. {"httpx": "WARNING"}')
    result: dict[str, str] = {}
    for name, level in data.items():
        if not isinstance(level, str):
            raise _bad(var, f"a JSON object whose values are level names (logger {name!r})")
        if not name:
            raise _bad(var, "a JSON object with non-empty logger names")
        result[name] = _level(f"{var}[{name!r}]", level)
    return result


def read_log_config(environ: Mapping[str, str] | None = None) -> LogConfig:
    """The BAND_LOG_* settings from the environment; raises LauncherError(config)."""
    env = os.environ if environ is None else environ
    raw = {var: _lookup(env, var) for var in LogVar}
    stream = raw[LogVar.STREAM].lower() or "stderr"
    if stream not in STREAMS:
        raise _bad(LogVar.STREAM, "stderr or stdout", raw[LogVar.STREAM])
    config = LogConfig(
        level=_level(LogVar.LEVEL, raw[LogVar.LEVEL]) if raw[LogVar.LEVEL] else "INFO",
        root_level=_level(LogVar.ROOT_LEVEL, raw[LogVar.ROOT_LEVEL])
        if raw[LogVar.ROOT_LEVEL]
        else None,
        file=raw[LogVar.FILE] or None,
        file_level=_level(LogVar.FILE_LEVEL, raw[LogVar.FILE_LEVEL])
        if raw[LogVar.FILE_LEVEL]
        else None,
        max_bytes=_count(LogVar.MAX_BYTES, raw[LogVar.MAX_BYTES]) if raw[LogVar.MAX_BYTES] else 0,
        backups=_count(LogVar.BACKUPS, raw[LogVar.BACKUPS]) if raw[LogVar.BACKUPS] else 1,
        stream=stream,
        overrides=_overrides(raw[LogVar.OVERRIDES]) if raw[LogVar.OVERRIDES] else {},
    )
    if config.max_bytes > 0 and config.backups == 0:
        raise LauncherError(
            Phase.CONFIG,
            f"{LogVar.BACKUPS} must be at least 1 when {LogVar.MAX_BYTES} is set "
            "(a rotating log with no backups never rotates)",
        )
    return config
