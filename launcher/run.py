"""`python -m launcher [--check]`: the only place failures become exit codes."""

from __future__ import annotations

import logging
import os
import sys

from launcher.constants import AGENT_HOME, EnvVar
from launcher.errors import LauncherError

logger = logging.getLogger("launcher")

USAGE = """usage: python -m launcher [--check]

Turn the workspace (WORKSPACE_DIR, band.yaml) into a running Band agent:
identity -> config -> paths -> credentials -> repo -> sync -> exec.

  --check   run every phase up to sync without side effects and print what a
            launch would do; exit 0 when it would start, 1 when not.
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if args not in ([], ["--check"]):
        print(USAGE, end="", file=sys.stderr)
        return 2
    check = args == ["--check"]

    from launcher.logconfig import read_log_config
    from launcher.logsetup import add_log_file, configure

    try:
        # BAND_LOG_*, before anything else logs (as upstream); --check writes no file.
        log_config = read_log_config()
        configure(log_config, files=not check)
    except LauncherError as exc:
        configure()  # defaults: stderr, INFO
        logger.error("launch failed: %s", exc)
        return 1
    # setpriv keeps root's HOME; git, uv and the agent all use the agent's home.
    os.environ[EnvVar.HOME] = AGENT_HOME
    try:
        from launcher.environment import LauncherEnv
        from launcher.launch import execute, resolve_launch

        launch = resolve_launch(
            LauncherEnv.from_environ(), on_paths=None if check else add_log_file
        )
        if check:
            from launcher.report import check_report

            print("\n".join(check_report(launch, log_config)), flush=True)
            return 0
        execute(launch)
    except LauncherError as exc:
        logger.error("launch failed: %s", exc)
        return 1
    except OSError as exc:
        logger.error("launch failed: %s", exc)
        return 1
