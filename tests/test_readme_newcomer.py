"""The newcomer's path as a non-root user, from a fresh clone in that user's own 0700 home,
on the local runtime: `uv run invoke doctor`, the README's "Your first agent" as written,
then `uv run invoke demo.up --headless`.

As root the test makes a throwaway user with `useradd` (its home a `mktemp -d` directory,
0700, its own), copies uv into `~/bin` (root's may sit under /root), clones the repository
there and hands the clone over. The user's uv finds the system python and fills its own
cache, as a first `uv run` does. Not as root, the test runs as this user, from a `mktemp -d`
clone. Either way the boxes run as that user (no uid of their own without root; the
runtime's warning says so), and afterwards nothing of the user runs. The root variant of
the README walkthrough is tests/test_readme.py; a clone under /root run as root is
tests/runtimes/test_local_reach_e2e.py.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.runtimes import boxnet, boxuids, hostbox
from tests.support.readme import REPO, UUID, clean_env, platform_listing, readme_block

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Newcomer:
    """Who runs the commands: a throwaway user (as root), else this user."""

    home: Path
    env: dict[str, str]
    uid: int
    gid: int

    @property
    def clone(self) -> Path:
        return self.home / "kit"

    def run(self, line: str, *, ok: bool = True) -> subprocess.CompletedProcess[str]:
        other = self.uid != os.getuid()  # root runs the commands as the throwaway user
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=self.clone,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            stdin=subprocess.DEVNULL,
            user=self.uid if other else None,
            group=self.gid if other else None,
            extra_groups=[] if other else None,
        )
        if ok:
            assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc


def _hand_over(top: Path, uid: int, gid: int) -> None:
    for directory, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.lchown(os.path.join(directory, name), uid, gid)
    os.lchown(top, uid, gid)


@pytest.fixture
def newcomer() -> Iterator[Newcomer]:
    home = Path(tempfile.mkdtemp(prefix="newcomer-"))  # 0700
    name = ""
    try:
        if os.geteuid() != 0:
            subprocess.run(
                ["git", "clone", "--quiet", str(REPO), str(home / "kit")], check=True, timeout=120
            )
            who = Newcomer(home, clean_env(), os.getuid(), os.getgid())
        else:
            if shutil.which("useradd") is None:
                pytest.skip("as root the test makes a throwaway user, which needs useradd")
            name = f"bkn-{secrets.token_hex(4)}"
            useradd = ["useradd", "--no-create-home", "--home-dir", str(home)]
            subprocess.run([*useradd, "--shell", "/bin/sh", name], check=True)
            user = pwd.getpwnam(name)
            (home / "bin").mkdir()
            shutil.copy2(hostbox.find_uv(), home / "bin" / "uv")
            # --no-hardlinks: the clone's objects are its own files, never the origin's
            # (handing a hard-linked object over would hand over the origin's too).
            subprocess.run(
                ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(home / "kit")],
                check=True,
                timeout=120,
            )
            _hand_over(home, user.pw_uid, user.pw_gid)
            network = {k: os.environ[k] for k in boxnet.HOST_NETWORK_ENV if k in os.environ}
            env = {
                "PATH": f"{home / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                "HOME": str(home),
                "USER": name,
                "LOGNAME": name,
                "LANG": "C.UTF-8",
                **network,
            }
            who = Newcomer(home, env, user.pw_uid, user.pw_gid)
        assert home.stat().st_mode & 0o777 == 0o700
        yield who
        if name:
            return
        for cleanup in (
            "uv run invoke kit.unprovision --name my-agent",
            "uv run invoke platform.down",
        ):
            if (who.clone / ".run" / "platform.json").exists():
                who.run(cleanup, ok=False)
    finally:
        if name:
            uid = pwd.getpwnam(name).pw_uid
            for pid in processes.uid_pids(uid):
                os.kill(pid, 9)
            boxuids.POOL.sweep(uid)  # its locks in /tmp: the next user of the uid finds none
            subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def _box_processes(box: Path) -> list[int]:
    return processes.tagged_pids(hostbox.box_tag(box))


def test_doctor_first_agent_and_demo_as_a_non_root_user_from_a_private_home(
    newcomer: Newcomer,
) -> None:
    doctor = newcomer.run("uv run invoke doctor").stdout
    assert "run directory:" in doctor
    assert "the agents run as you" in doctor
    assert "BLOCKS" not in doctor
    # A user's `uv run` installs the kit, not the contributors' tools (`default-groups`).
    tools = ("pytest", "mypy", "kubernetes_validate")
    assert not [t for t in tools if list(newcomer.clone.glob(f".venv/lib/*/site-packages/{t}"))]

    up, copy, provision, ping, unprovision, down = readme_block("Your first agent")
    assert "BAND_REST_URL=http://127.0.0.1:" in newcomer.run(up).stdout
    newcomer.run(copy)
    made = newcomer.run(provision)
    agent_id = made.stdout.strip()
    assert UUID.match(agent_id), agent_id
    assert "every box runs as you" in made.stderr  # the runtime's warning, on stderr
    box = newcomer.clone / ".run" / "runtimes" / "local" / "boxes" / "my-agent"
    agent = _box_processes(box)
    assert agent, "no process of the box"
    assert {processes.owner(pid) for pid in agent} == {newcomer.uid}
    assert "echo: @my-agent ping:" in newcomer.run(ping).stdout
    assert "removed agent:" in newcomer.run(unprovision).stdout
    assert platform_listing(newcomer.clone, "/api/v1/me/agents") == []
    assert _box_processes(box) == []
    assert "replace-with-agent-id" in (newcomer.clone / "my-agent" / "band.yaml").read_text()
    assert "platform.down: " in newcomer.run(down).stdout

    demo = newcomer.run("uv run invoke demo.up --headless")
    assert "demo.up: verdict: decided" in demo.stdout, demo.stdout[-3000:]
    if newcomer.uid != os.getuid():  # a throwaway user: nothing of it may still run
        assert processes.uid_pids(newcomer.uid) == []
