"""`--brains stub` on the docker runtime, as a user runs it: `uv run invoke demo.build
--brains stub` (the kit image, the CLI image, the `codex --version` proof), then `uv run
invoke demo.up --brains stub --runtime docker --headless` (repo root) on `happy`.

Each sandbox is a container of the CLI image (band-python-kit-cli:local): the PM's
ClaudeSDKAdapter runs the claude CLI from its workspace venv (the claude-agent-sdk wheel),
the Dev's CodexAdapter the image's codex, the Architect CrewAI; every model call goes
through the sandbox's egress and credential proxies to the LLM stub on the host. Checked:
the verdict is reached; each agent's turns are in the stub's journal over its framework's
wire API, all accepted (the stub takes only the host's canary keys, never a placeholder);
while the agents run (`--keep`) no canary is in any container's environment (`docker
inspect`), startup log or files; `demo.down` then leaves nothing (`leftovers`).

Then `--brains real` with the providers played by a stub (`tests/demo/real_provider.py`).
CI time: two runs. The other tiers run elsewhere: `happy` and `runaway` on docker with the
scripted brains (`test_demo_docker.py`); `no-handoff` on the local runtime, scripted
(`tests/demo/test_demo_e2e.py`) and fired by the real adapters' traffic
(`tests/demo/test_stub_brains_e2e.py`). Its nudge and add are the host-side conductor's
room calls, whichever runtime runs the agents.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from bandkit.demo import cli_image, stub_brains, teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from examples.docker_demo.cast import CAST, Role
from tests.demo import real_provider
from tests.demo.leftovers import leftovers, secrets_in
from tests.demo.support import AGENT_KEY_PREFIX, CANARY, demo_env, plant_canary
from tests.runtimes.helpers import REPO, scratch_dir
from tests.support import images

pytestmark = [
    pytest.mark.docker,
    pytest.mark.timeout(1800),
    pytest.mark.daemon_demo,
]

WIRE = {"pm": "anthropic.messages", "dev": "openai.responses", "architect": "openai.chat"}


def invoke(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["uv", "run", "invoke", *args],
        cwd=REPO,
        env={**demo_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@dataclass
class Platform:
    run_dir: Path
    pid: int
    layout: DemoLayout


@pytest.fixture(scope="module")
def platform(run_shared: Path) -> Iterator[Platform]:
    # Workers that run this module's tests take turns: the first builds, the next finds
    # every image built (2 s) instead of building them all beside it.
    with FileLock(str(run_shared / "demo-build-stub.lock"), timeout=1800):
        built = invoke("demo.build", "--brains", "stub", timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert f"demo.build: codex-cli {cli_image.codex_version()} (" in built.stdout
    run_dir = scratch_dir("demo-stub-docker-")
    plant_canary(run_dir)
    record, _ = service.up(run_dir)
    layout = DemoLayout.for_run_dir(run_dir)
    try:
        yield Platform(run_dir, record.pid, layout)
    finally:
        teardown.down(run_dir, env={}, log=print)  # whatever a failed test left
        service.down(run_dir)
        images.remove_agent_images(run_dir.resolve(), layout.box_root.resolve())
        shutil.rmtree(run_dir, ignore_errors=True)
        if layout.box_root != run_dir / "demo-boxes":
            shutil.rmtree(layout.box_root, ignore_errors=True)


def turns(journal: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in journal.read_text().splitlines() if line]


def built_on(sandbox: str, base: str) -> bool:
    """The sandbox runs an agent image (`kit.build-agent`) made from `base`: every layer of
    `base` is one of its image's."""
    image = json.loads(inspect(sandbox))[0]["Config"]["Image"]
    if not image.startswith("band-agent-"):
        return False

    def layers(ref: str) -> list[str]:
        out = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        found: list[str] = json.loads(out)
        return found

    return set(layers(base)) <= set(layers(image))


def inspect(name: str) -> str:
    return subprocess.run(
        ["docker", "inspect", name], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def container_text(name: str) -> str:
    """What a running container shows: inspect (env, labels, mounts), startup log, and
    every process's environment inside it."""
    logs = subprocess.run(
        ["docker", "logs", name], capture_output=True, text=True, check=False, timeout=60
    )
    environ = subprocess.run(
        ["docker", "exec", name, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return "\n".join([inspect(name), logs.stdout, logs.stderr, environ.stdout])


def test_happy_with_the_real_frameworks_on_docker(platform: Platform) -> None:
    started = time.monotonic()
    args = ["demo.up", "--brains", "stub", "--runtime", "docker", "--headless", "--keep"]
    done = invoke(*args, "--scenario", "happy", "--run-dir", str(platform.run_dir))
    seconds = time.monotonic() - started
    print(f"happy --brains stub on docker: {seconds:.1f} s")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    out = done.stdout
    assert "docker runtime" in out
    assert "Maya (PM) → Jordan (Architect)" in out
    assert "VERDICT:" in out
    home = stub_brains.stub_dir(platform.layout)
    keys = [
        line.split("=", 1)[1]
        for line in (home / "llm-keys").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    ]
    assert len(keys) == 3
    for role in Role:
        sandbox = CAST[role].sandbox
        assert built_on(sandbox, cli_image.CLI_TAG), role  # its agent image, on the CLI image
        workspace = platform.layout.workspace(role)  # bind-mounted: the sandbox's files
        assert secrets_in(keys, container_text(sandbox), roots=(workspace,)) == [], role
    down = invoke("demo.down", "--run-dir", str(platform.run_dir))
    assert down.returncode == 0, down.stdout + down.stderr
    seen = turns(home / "llm-requests.jsonl")
    refused = [(t["agent"], t["status"], t["error"]) for t in seen if t["status"] != 200]
    assert refused == []
    for agent, api in WIRE.items():
        mine = [t for t in seen if t["agent"] == agent]
        assert mine, f"{agent} never reached the stub"
        assert {t["api"] for t in mine} == {api}, agent
        assert any(str(t["rule"]).endswith("band_send_message") for t in mine), agent
    left = leftovers(platform.run_dir, docker=True, keep_pids=(platform.pid,))
    assert left == [], "\n".join(left)
    roots = (platform.run_dir, platform.layout.box_root)
    outputs = (out, done.stderr, down.stdout, down.stderr)
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], *outputs, roots=roots) == []
    assert secrets_in(keys, *outputs) == []  # the stub's key file holds them, 0600, host-side


def test_real_brains_on_docker_with_the_host_keys(platform: Platform) -> None:
    """`--brains real` on docker, the providers played by the LLM stub (`real_provider`):
    the host's two keys reach it through each container's credential proxy, and are in no
    container's environment, log or files."""
    with real_provider.provider() as provider:
        args = ["demo.up", "--brains", "real", "--runtime", "docker", "--headless", "--keep"]
        done = invoke(
            *args,
            "--scenario",
            "happy",
            "--run-dir",
            str(platform.run_dir),
            env=provider.host_env(),
        )
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
        assert "brains: the providers' APIs with this host's keys" in done.stdout
        assert "VERDICT:" in done.stdout
        keys = list(real_provider.KEYS)
        for role in Role:
            sandbox = CAST[role].sandbox
            workspace = platform.layout.workspace(role)
            assert secrets_in(keys, container_text(sandbox), roots=(workspace,)) == [], role
        down = invoke("demo.down", "--run-dir", str(platform.run_dir))
        assert down.returncode == 0, down.stdout + down.stderr
        seen = provider.turns()
    assert [t for t in seen if t["status"] != 200] == []
    for agent, api in WIRE.items():
        assert {t["api"] for t in seen if t["agent"] == agent} == {api}, agent
    left = leftovers(platform.run_dir, docker=True, keep_pids=(platform.pid,))
    assert left == [], "\n".join(left)
    outputs = (done.stdout, done.stderr, down.stdout, down.stderr)
    assert secrets_in(keys, *outputs, roots=(platform.run_dir, platform.layout.box_root)) == []
