"""`python -m launcher.prebuild`: the sync phase alone, for an agent image.

`kit.build-agent` runs this (through the image's entrypoint, so as the agent uid) in a
container of the kit image with the workspace mounted where its sandboxes mount it
(WORKSPACE_DIR), then commits the container. The venv (runtime.environmentPath) and the
stamp (runtime.statePath) are then in the image, so a launch whose uv.lock,
pyproject.toml, interpreter and project path are the same takes the launcher's fast path:
uv is not run, nothing is downloaded. Every launch still runs all of its own checks.

It runs the launch's own phases up to paths (identity, config, paths) and then the very
sync a launch runs (`launcher.sync.synchronize`); no agent id, endpoint or credential is
needed or read. The uv cache goes to a scratch directory removed afterwards, so the image
holds the venv and not the wheels it came from. Exit 0 when synced, 1 with the reason.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from launcher.config import (
    Endpoints,
    locate_config,
    read_document,
    resolve_workspace,
    validated_spec,
)
from launcher.constants import AGENT_HOME, EnvVar
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError
from launcher.handoff import ResolvedLaunch
from launcher.identity import require_agent_uid
from launcher.paths import resolve_paths
from launcher.stamp import base_interpreter, installed_distributions, read_stamp
from launcher.sync import synchronize

logger = logging.getLogger("launcher.prebuild")
USAGE = "usage: python -m launcher.prebuild   (WORKSPACE_DIR names the workspace)\n"


def prebuild(env: LauncherEnv) -> ResolvedLaunch:
    require_agent_uid(env)
    workspace = resolve_workspace(env)
    document = read_document(locate_config(env, workspace))
    spec = validated_spec(document, trusted_digest=None)
    paths = resolve_paths(spec, workspace, Path(env.sdk_home))
    launch = ResolvedLaunch(
        workspace=workspace,
        config_path=document.path,
        config_digest=document.digest,
        config_revalidated=True,
        project=paths.project,
        entrypoint=paths.entrypoint,
        environment_path=paths.environment_path,
        state_path=paths.state_path,
        cache_path=paths.cache_path,
        log_path=paths.log_path,
        sdk_home=Path(env.sdk_home),
        sdk_uv=env.sdk_uv,
        interpreter=base_interpreter(),
        agent_id="",
        endpoints=Endpoints(rest_url="", ws_url="", insecure=False),
        credential_source=None,
        repo=None,
        credentials={},
        stamp=read_stamp(paths.state_path),  # a re-run in a built image: its fast path
    )
    scratch = Path(tempfile.mkdtemp(prefix="band-prebuild-cache-"))
    try:
        synchronize(replace(launch, cache_path=scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return launch


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(USAGE, end="", file=sys.stdout if args[0] in ("-h", "--help") else sys.stderr)
        return 0 if args[0] in ("-h", "--help") else 2
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    os.environ[EnvVar.HOME] = AGENT_HOME
    try:
        launch = prebuild(LauncherEnv.from_environ())
    except (LauncherError, OSError) as exc:
        logger.error("prebuild failed: %s", exc)
        return 1
    count = len(installed_distributions(launch.environment_path))
    print(f"prebuild: {count} distribution(s) in {launch.environment_path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
