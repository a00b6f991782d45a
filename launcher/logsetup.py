"""Launcher logging: the console from the start, <logPath>/launcher.log once paths resolve.

Format `{asctime} {name} {levelname} {message}` with ISO-8601 timestamps, as upstream.
The `BAND_LOG_*` settings (`logconfig`) apply with the SDK's meaning: console level and
stream, root level, per-logger overrides, an optional BAND_LOG_FILE sink, the file
level, and size rotation, which also applies to launcher.log (upstream's file sink
after paths resolve). Unlike upstream, BAND_LOG_FILE keeps receiving lines after
launcher.log starts instead of being replaced by it. Files this module creates are
owner-only (every rotated generation too); an existing BAND_LOG_FILE keeps its mode.
Nothing logged anywhere carries a secret value.
"""

from __future__ import annotations

import logging
import os
import sys
from io import TextIOWrapper
from pathlib import Path

from launcher.constants import LOG_FILENAME
from launcher.errors import LauncherError, Phase
from launcher.logconfig import LogConfig, LogVar

FORMAT = "{asctime} {name} {levelname} {message}"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
FILE_MODE = 0o600
DIR_MODE = 0o700
# Loggers gated at the configured level, like band's in upstream (whose launcher logs
# under `band.`); everything else follows the root level.
GATED_LOGGERS = ("launcher", "band")

_config = LogConfig()


def _formatter() -> logging.Formatter:
    return logging.Formatter(FORMAT, datefmt=DATE_FORMAT, style="{")


class EarlyRecords(logging.Handler):
    """Keeps the records logged before the log path is known, for launcher.log."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _OwnerOnly:
    """Create the log file 0600 when it does not exist yet; leave an existing one be."""

    baseFilename: str

    def _open(self) -> TextIOWrapper:
        try:
            fd = os.open(self.baseFilename, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        except FileExistsError:
            pass
        else:
            os.fchmod(fd, FILE_MODE)  # the creation mode is masked by umask, fchmod is not
            os.close(fd)
        return super()._open()  # type: ignore[misc, no-any-return]


class OwnerOnlyFileHandler(_OwnerOnly, logging.FileHandler):
    pass


def _file_handler(path: Path) -> logging.Handler:
    handler: logging.Handler
    if _config.max_bytes > 0:
        from logging.handlers import RotatingFileHandler

        class OwnerOnlyRotating(_OwnerOnly, RotatingFileHandler):
            pass

        handler = OwnerOnlyRotating(
            path, maxBytes=_config.max_bytes, backupCount=_config.backups, encoding="utf-8"
        )
    else:
        handler = OwnerOnlyFileHandler(path, encoding="utf-8")
    handler.setFormatter(_formatter())
    if _config.pin_handlers:
        handler.setLevel(_config.effective_file_level)
    return handler


def _create_parents(path: Path) -> None:
    """Make the missing parent directories one by one, each 0700; keep existing ones."""
    missing: list[Path] = []
    directory = path.parent
    while not directory.exists() and directory.parent != directory:
        missing.append(directory)
        directory = directory.parent
    for segment in reversed(missing):
        try:
            segment.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue


def configure(config: LogConfig | None = None, *, files: bool = True) -> None:
    """Console (and BAND_LOG_FILE unless `files` is False, as for --check, which writes
    nothing) now; raises LauncherError(config) if the file cannot be opened."""
    global _config
    _config = config or LogConfig()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    console = logging.StreamHandler(sys.stdout if _config.stream == "stdout" else sys.stderr)
    console.setFormatter(_formatter())
    if _config.pin_handlers:
        console.setLevel(_config.level)
    root.addHandler(console)
    root.addHandler(EarlyRecords())
    root.setLevel(_config.effective_root_level)
    for name in GATED_LOGGERS:
        logging.getLogger(name).setLevel(_config.logger_level)
    for name, level in _config.overrides.items():
        logging.getLogger(name).setLevel(level)
    if _config.file and files:
        path = Path(_config.file).expanduser().absolute()
        try:
            _create_parents(path)
            root.addHandler(_file_handler(path))
        except OSError as exc:
            raise LauncherError(
                Phase.CONFIG, f"cannot open {LogVar.FILE} {path}: {exc.strerror or exc}"
            ) from None


def _same_file(handler: logging.Handler, path: Path) -> bool:
    name = getattr(handler, "baseFilename", None)
    return name is not None and os.path.realpath(name) == os.path.realpath(path)


def add_log_file(log_dir: Path) -> Path:
    """Append to <logPath>/launcher.log (created 0700/0600 if missing), early lines first."""
    log_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    path = log_dir / LOG_FILENAME
    root = logging.getLogger()
    early = [h for h in root.handlers if isinstance(h, EarlyRecords)]
    for buffer in early:
        root.removeHandler(buffer)
    if any(_same_file(h, path) for h in root.handlers):
        return path  # BAND_LOG_FILE is launcher.log: it has every line already
    handler = _file_handler(path)
    path.chmod(FILE_MODE)
    for buffered in early:
        for record in buffered.records:
            if record.levelno >= handler.level:
                handler.handle(record)
    root.addHandler(handler)
    return path
