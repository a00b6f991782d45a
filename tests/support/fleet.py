"""A fleet's agents as a platform user sees them (the README fleet tests): a marker sent
to each agent while a rollout replaces its sandbox, and whether it was answered."""

from __future__ import annotations

import secrets
import subprocess
import threading
from pathlib import Path

from bandkit.emulator import service
from bandkit.kit import agent_check
from tests.support.readme import clean_env


class Platform:
    """The clone's local platform, as a user of its human API."""

    def __init__(self, clone: Path) -> None:
        record = service.running(clone / ".run")
        assert record is not None
        self.url, self.key = record.rest_url, service.read_user_key(record)
        self.run_dir = clone / ".run"

    def _where(self, name: str) -> dict[str, str]:
        path = self.run_dir / "provision" / name / "manifest.json"
        room, agent = agent_check.recorded_ids(path, name)
        return {"api_key": self.key, "rest_url": self.url, "room_id": room, "agent_id": agent}

    def mention(self, name: str, text: str) -> None:
        agent_check.mention(**self._where(name), agent_name=name, text=text)

    def answered(self, name: str, text: str) -> bool:
        return bool(agent_check.reply_to(**self._where(name), token=text))


def rollout_with_markers(
    clone: Path,
    line: str,
    platform: Platform,
    agents: tuple[str, ...],
    env: dict[str, str] | None = None,
) -> tuple[dict[str, str], str]:
    """Run the rollout `line` (in `env`, default a clean one); as each agent's old sandbox
    is removed, mention it with a marker. The markers sent, by agent, and its stdout."""
    markers: dict[str, str] = {}
    proc = subprocess.Popen(
        ["bash", "-c", line],
        cwd=clone,
        env=env or clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stdout is not None
    seen: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for text in proc.stderr:
            seen.append(text)
            for name in agents:
                if text.startswith(f"fleet: {name}: old sandbox removed"):
                    markers[name] = f"marker:{secrets.token_hex(4)}"
                    platform.mention(name, markers[name])

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout = proc.stdout.read()
    assert proc.wait(timeout=300) == 0, stdout + "".join(seen)
    watcher.join(timeout=30)
    assert sorted(markers) == sorted(agents), "".join(seen)
    return markers, stdout
