"""Run a command as root: directly when we are root, else through passwordless `sudo -n`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence


def as_root(argv: Sequence[str]) -> list[str] | None:
    """`argv` as root, or None when neither root nor sudo is available (caller explains)."""
    if os.geteuid() == 0:
        return list(argv)
    if shutil.which("sudo") is None:
        return None
    return ["sudo", "-n", *argv]
