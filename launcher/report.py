"""`python -m launcher --check`: every phase up to sync, no side effects, one screen."""

from __future__ import annotations

from launcher.launch import ResolvedLaunch
from launcher.sync import plan_sync, resolve_uv


def check_report(launch: ResolvedLaunch) -> list[str]:
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
        ("logs", str(launch.log_path / "launcher.log")),
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
