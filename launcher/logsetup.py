"""Launcher logging: stderr from the start, <logPath>/launcher.log once paths resolve.

Format `{asctime} {name} {levelname} {message}` with ISO-8601 timestamps. Level from
BAND_LOG_LEVEL (default INFO). Nothing logged anywhere carries a secret value.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from launcher.constants import LOG_FILENAME

FORMAT = "{asctime} {name} {levelname} {message}"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


def _formatter() -> logging.Formatter:
    return logging.Formatter(FORMAT, datefmt=DATE_FORMAT, style="{")


class EarlyRecords(logging.Handler):
    """Keeps the records logged before the log path is known, for launcher.log."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def configure_console(level: str = "") -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(_formatter())
    root.addHandler(console)
    root.addHandler(EarlyRecords())
    name = (level or "INFO").upper()
    root.setLevel(name if name in logging.getLevelNamesMapping() else "INFO")


def add_log_file(log_dir: Path) -> Path:
    """Append to <logPath>/launcher.log (created 0700/0600 if missing)."""
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = log_dir / LOG_FILENAME
    handler = logging.FileHandler(path, encoding="utf-8")
    path.chmod(0o600)
    handler.setFormatter(_formatter())
    root = logging.getLogger()
    for early in [h for h in root.handlers if isinstance(h, EarlyRecords)]:
        root.removeHandler(early)
        for record in early.records:
            handler.handle(record)
    root.addHandler(handler)
    return path
