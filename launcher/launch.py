"""Resolve, then execute: the launch as one frozen record, and the exec into the agent.

`resolve_launch` runs the checking phases (identity, config, paths, credentials)
and returns a `ResolvedLaunch`; it writes nothing. `execute` runs the phases with
side effects (repo, sync) and ends in `os.execve`, so the agent process *is* the
launcher process (same pid) and signals reach it directly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from launcher.config import (
    locate_config,
    read_document,
    resolve_agent_id,
    resolve_endpoints,
    resolve_workspace,
    validated_spec,
)
from launcher.constants import AGENT_HOME, EnvVar
from launcher.credentials import resolve_credentials
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase
from launcher.handoff import ResolvedLaunch
from launcher.identity import require_agent_uid
from launcher.paths import require_project_present, resolve_paths, runtime_path_problem
from launcher.reach import wait_for_endpoints
from launcher.stamp import base_interpreter, read_stamp, trusted_config_digest
from launcher.urls import shown_endpoint

logger = logging.getLogger("launcher")


def _stamp_for(raw_state_path: object, workspace: Path, sdk_home: Path) -> dict[str, Any]:
    """The stamp, read only from a state path that obeys the runtime path rule."""
    if not isinstance(raw_state_path, str):
        return {}
    if runtime_path_problem(raw_state_path, workspace=workspace, sdk_home=sdk_home):
        return {}
    return read_stamp(Path(raw_state_path))


def resolve_launch(
    env: LauncherEnv, *, on_paths: Callable[[Path], object] | None = None
) -> ResolvedLaunch:
    """identity -> config -> paths -> credentials; raises LauncherError(phase, ...).

    Writes nothing itself; `on_paths(log_path)` runs once paths resolve (the
    launch uses it to start launcher.log, --check passes nothing).
    """
    uid = require_agent_uid(env)
    logger.info("phase identity: uid %d", uid)

    workspace = resolve_workspace(env)
    sdk_home = Path(env.sdk_home)
    document = read_document(locate_config(env, workspace))
    runtime_section = document.data.get("runtime")
    raw_state = (
        runtime_section.get("statePath", runtime_section.get("state_path"))
        if isinstance(runtime_section, dict)
        else None
    )
    stamp = _stamp_for(raw_state, workspace, sdk_home)
    trusted = trusted_config_digest(stamp)
    spec = validated_spec(document, trusted_digest=trusted)
    endpoints = resolve_endpoints(spec, env)
    agent_id = resolve_agent_id(spec, env)
    endpoint_wait_s = env.endpoint_wait_s()
    logger.info(
        "phase config: %s (%s), agent %s, rest %s, ws %s",
        document.path,
        "validated before, unchanged" if document.digest == trusted else "validated",
        agent_id,
        shown_endpoint(endpoints.rest_url),
        shown_endpoint(endpoints.ws_url),
    )
    if endpoints.insecure:
        logger.warning(
            "insecure endpoints in use (plain http/ws, allowed by %s=1): for the local "
            "emulator only, never for a real deployment",
            EnvVar.ALLOW_INSECURE_ENDPOINTS,
        )

    paths = resolve_paths(spec, workspace, sdk_home)
    if on_paths is not None:
        try:
            on_paths(paths.log_path)
        except OSError as exc:
            raise LauncherError(
                Phase.PATHS, f"cannot write the launcher log under {paths.log_path}: {exc.strerror}"
            ) from None
    logger.info("phase paths: project %s, entrypoint %s", paths.project, paths.entrypoint)

    credentials = resolve_credentials(spec, env, workspace)
    source = spec.credentials.source if spec.credentials else None
    logger.info(
        "phase credentials: tier %s, %d name(s) set: %s",
        source or "environment only",
        len(credentials),
        ", ".join(sorted(credentials)),
    )
    return ResolvedLaunch(
        workspace=workspace,
        config_path=document.path,
        config_digest=document.digest,
        config_revalidated=document.digest != trusted,
        project=paths.project,
        entrypoint=paths.entrypoint,
        environment_path=paths.environment_path,
        state_path=paths.state_path,
        cache_path=paths.cache_path,
        log_path=paths.log_path,
        sdk_home=sdk_home,
        sdk_uv=env.sdk_uv,
        interpreter=base_interpreter(),
        agent_id=agent_id,
        endpoints=endpoints,
        credential_source=source,
        repo=spec.repo,
        credentials=credentials,
        stamp=stamp,
        endpoint_wait_s=endpoint_wait_s,
    )


def build_child_environment(launch: ResolvedLaunch) -> dict[str, str]:
    """Inherited env + canonical credential names + identity, endpoints and HOME."""
    child = dict(os.environ)
    child.update(launch.credentials)
    child[EnvVar.AGENT_ID] = launch.agent_id
    child[EnvVar.REST_URL] = launch.endpoints.rest_url
    child[EnvVar.WS_URL] = launch.endpoints.ws_url
    child[EnvVar.HOME] = AGENT_HOME
    return child


def execute(launch: ResolvedLaunch) -> NoReturn:
    """repo -> sync -> exec. Only returns by raising."""
    if launch.repo is not None:
        from launcher.repo import bootstrap_repository

        bootstrap_repository(
            launch.repo,
            project=launch.project,
            state_path=launch.state_path,
            agent_id=launch.agent_id,
        )
        require_project_present(launch.project, launch.entrypoint)

    from launcher.sync import synchronize

    synchronize(launch)

    python = launch.environment_path / "bin" / "python"
    if not python.is_file():
        raise LauncherError(Phase.EXEC, f"the venv has no interpreter after the sync: {python}")
    wait_for_endpoints((launch.endpoints.rest_url, launch.endpoints.ws_url), launch.endpoint_wait_s)
    argv = [str(python), str(launch.entrypoint)]
    logger.info("phase exec: %s %s (cwd %s, pid %d)", *argv, launch.project, os.getpid())
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.chdir(launch.project)
    try:
        os.execve(argv[0], argv, build_child_environment(launch))  # noqa: S606 - the handoff
    except OSError as exc:
        raise LauncherError(Phase.EXEC, f"cannot execute {python}: {exc.strerror}") from None
