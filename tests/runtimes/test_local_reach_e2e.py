"""The local runtime from wherever a user cloned the repository, as whole commands.

- As root, the README's "Your first agent" in a fresh clone under a 0700 directory (what
  /root is, and any `mktemp -d`): `kit.provision --runtime local` connects, `kit.ping`
  answers, and `kit.unprovision` leaves no process of the box's uid, not even one the
  agent started with `setsid env -i` (no tag, its own session).

As a non-root user from that user's own 0700 home (the doctor, this walkthrough and the
demo as whole commands): tests/test_readme_newcomer.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from tests.support.readme import UUID, readme_block, run
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("setpriv") is None,
        reason="a uid per box (and a throwaway user) needs root and setpriv",
    ),
]

REPO = Path(__file__).resolve().parents[2]
ESCAPE = (
    "import subprocess as _s; "
    "_s.Popen(['setsid', 'env', '-i', 'sleep', '600'], start_new_session=True)\n"
)


@pytest.fixture
def private_clone() -> Iterator[Path]:
    """A fresh clone under a `mktemp -d` directory (0700: no other uid traverses it)."""
    parent = Path(tempfile.mkdtemp(prefix="private-clone-"))
    target = parent / "kit"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    yield target
    for cleanup in ("uv run invoke kit.unprovision --name my-agent", "uv run invoke platform.down"):
        if (target / ".run" / "platform.json").exists():
            subprocess.run(["bash", "-c", cleanup], cwd=target, capture_output=True, timeout=120)
    shutil.rmtree(parent, ignore_errors=True)


def sleepers(uid: int) -> list[int]:
    def match(p: processes.Proc) -> bool:
        return p.cmdline == b"sleep\x00600\x00"

    return [pid for pid in processes.scan(match) if pid in processes.uid_pids(uid)]


def test_first_agent_from_a_private_parent_and_nothing_of_its_uid_after(
    private_clone: Path,
) -> None:
    clone = private_clone
    assert clone.parent.stat().st_mode & 0o777 == 0o700
    up, copy, provision, ping, unprovision, down = readme_block("Your first agent")
    run(up, clone)
    run(copy, clone)
    main = clone / "my-agent" / "main.py"
    future = "from __future__ import annotations\n"
    assert future in main.read_text()
    main.write_text(main.read_text().replace(future, future + ESCAPE, 1))  # a hostile agent

    agent_id = run(provision, clone).stdout.strip()

    assert UUID.match(agent_id), agent_id
    meta = clone / ".run" / "runtimes" / "local" / "sandboxes" / "my-agent" / "sandbox.json"
    uid = int(json.loads(meta.read_text())["uid"])
    assert uid >= 1_900_000_000
    escapee = int(wait_for(lambda: (sleepers(uid) or [0])[0], 30, "the agent's escapee"))
    assert "echo: @my-agent ping:" in run(ping, clone).stdout

    run(unprovision, clone)

    assert not processes.alive(escapee), "the setsid env -i escapee outlived kit.unprovision"
    assert processes.uid_pids(uid) == [], f"processes of the box uid {uid} are left"
    assert "platform.down: " in run(down, clone).stdout
