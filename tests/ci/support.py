"""Checks the CI tests share: what `.github/dependabot.yml` must cover."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _dirs(update: Mapping[str, Any]) -> list[str]:
    listed = update.get("directories") or [update.get("directory")]
    return [str(d) for d in listed if d]


def dependabot_problems(
    config: Mapping[str, Any], projects: Iterable[str], gate_days: float
) -> list[str]:
    """What is wrong with a Dependabot config for these uv project directories (repo-relative,
    `.` the root) and a quarantine gate of `gate_days`; [] when nothing is."""
    updates = [u for u in config.get("updates") or [] if isinstance(u, Mapping)]
    problems = [] if config.get("version") == 2 else ["version must be 2"]
    uv = [u for u in updates if u.get("package-ecosystem") == "uv"]
    covered = {d.strip("/") or "." for u in uv for d in _dirs(u)}
    for project in sorted(set(projects) - covered):
        problems.append(f"uv project {project} is not in any uv update's directories")
    if not any(u.get("package-ecosystem") == "github-actions" for u in updates):
        problems.append("no github-actions update: the workflows' SHA pins would go stale")
    for update in updates:
        name = f"{update.get('package-ecosystem')} update"
        cooldown = update.get("cooldown") or {}
        days = {k: v for k, v in cooldown.items() if str(k).endswith("-days")}
        if "default-days" not in days:
            problems.append(f"{name}: no cooldown default-days (the gate needs {gate_days:g})")
        for key, value in days.items():
            if not isinstance(value, int) or value < gate_days:
                problems.append(
                    f"{name}: cooldown {key} {value} is shorter than the {gate_days:g}-day gate"
                )
        groups = update.get("groups") or {}
        if not any("*" in (g or {}).get("patterns", []) for g in groups.values()):
            problems.append(f"{name}: not grouped (one pull request per ecosystem: patterns ['*'])")
    return problems
