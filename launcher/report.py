"""`python -m launcher --check`: every phase up to sync, no side effects, one screen."""

from __future__ import annotations

from launcher.handoff import ResolvedLaunch
from launcher.logconfig import LogConfig
from launcher.sync import plan_sync, resolve_uv


def logging_summary(config: LogConfig, log_file: str) -> str:
    files = [log_file, *([config.file] if config.file else [])]
    rotation = (
        f", rotated at {config.max_bytes} bytes keeping {config.backups}"
        if config.max_bytes
        else ""
    )
    overrides = ", ".join(f"{name}={level}" for name, level in config.overrides.items())
    return (
        f"{config.level} on {config.stream}, root {config.effective_root_level}; "
        f"{config.effective_file_level} to {', '.join(files)}{rotation}"
        + (f"; overrides {overrides}" if overrides else "")
    )


def check_report(launch: ResolvedLaunch, log_config: LogConfig | None = None) -> list[str]:
    """Lines describing what a launch would do; raises LauncherError like a launch."""
    endpoints = launch.endpoints
    rows = [
        ("workspace", str(launch.workspace)),
        (
            "config",
            f"{launch.config_path} ("
            + ("validated" if launch.config_revalidated else "unchanged since last launch")
            + ")",
        ),
        ("agent id", launch.agent_id),
        ("rest url", endpoints.rest_url),
        ("ws url", endpoints.ws_url),
    ]
    if endpoints.insecure:
        rows.append(("WARNING", "plain http/ws endpoints (local emulator only)"))
    rows += [
        ("project", str(launch.project)),
        ("entrypoint", str(launch.entrypoint)),
        ("venv", str(launch.environment_path)),
        ("state", str(launch.state_path)),
        ("cache", str(launch.cache_path)),
        ("logs", logging_summary(log_config or LogConfig(), str(launch.log_path / "launcher.log"))),
        (
            "credentials",
            f"tier {launch.credential_source or 'environment only'}; set: "
            + (", ".join(sorted(launch.credentials)) or "none"),
        ),
    ]
    if launch.repo is None:
        rows.append(("repo", "none (project from the workspace)"))
    else:
        from launcher.repo import planned_action

        rows.append(("repo", f"{planned_action(launch.project)} from {launch.repo.url}"))
    if launch.repo is not None and not (launch.project / "pyproject.toml").is_file():
        rows.append(("sync", "decided after the repo phase (project not cloned yet)"))
    else:
        plan = plan_sync(launch)
        if plan.needed:
            uv = resolve_uv(launch.sdk_uv)
            rows.append(("sync", f"needed: {plan.reason} ({uv} sync --locked)"))
        else:
            rows.append(("sync", f"skip uv: {plan.reason}"))
    rows.append(("exec", f"{launch.environment_path}/bin/python {launch.entrypoint}"))
    width = max(len(label) for label, _ in rows)
    lines = ["launcher check: every phase up to sync passed; nothing was changed"]
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    return lines
