"""The README's "Driving sbx yourself" lines, run as written against the simulator.

- Custody, per sbx generation (fast): each generation's `sbx secret set-custom` line (and
  its `sbx secret rm` line) on that generation's simulator stores the key in sbx's host
  store only, scoped to the sandbox, with the placeholder `proxy-managed`; where the
  version reads stdin the key never reaches argv.
- The whole path, in a fresh clone (e2e), on simulated 0.47 (the current kit, `sbx run`
  attached on a terminal past the idle auto-stop) and 0.35 (the legacy kit directory,
  headless): the setup block, the custody secret, `sbx create --kit
  "$PWD/docker/band_python_kit..."`, a replying agent, and the teardown lines leave no
  sandbox, secret or template. The simulator refuses an image it does not hold, so the
  `docker save | sbx template load` line is proven needed; `docker` is a stand-in serving
  a small genuine archive (no image build here: the `image.build` line is the one skipped).
  The platform is the emulator over TLS, named in band.yaml and `--host` as the README
  says for another deployment.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.fakes.docker_archive import DIR_ENV, FakeDocker
from tests.fakes.simharness import Sim, simulator
from tests.runtimes.helpers import Platform, emulator, scratch_dir
from tests.support.readme import clean_env, readme_blocks
from tests.support.wait import wait_for

HEADING = "Driving sbx yourself, without kit.provision"
CANARY = "canary-agent-key-direct-7c1d"
# The generation each block is for, as its prose names it, and the simulator version.
GENERATIONS = {
    "0.47.0": "sbx 0.42.1 and later",
    "0.41.0": "sbx 0.38 to 0.42.0",
    "0.35.0": "sbx 0.34 to 0.37",
}
IDLE_S = 3.0


def blocks() -> tuple[list[str], dict[str, list[str]]]:
    """The setup block, and each generation's block by simulator version."""
    found = readme_blocks(HEADING)
    setup = found[0][1]
    by_version = {}
    for version, intro in GENERATIONS.items():
        (lines,) = [lines for prose, lines in found[1:] if prose.startswith(intro)]
        by_version[version] = lines
    return setup, by_version


def shell(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def sim_env(sim: Sim, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = clean_env() | {k: v for k, v in sim.env.items() if k == "PATH" or k.startswith("SBX_")}
    return env | (extra or {})


def write_key(where: Path, key: str) -> None:
    path = where / "my-agent.key"
    path.write_text(key)
    path.chmod(0o600)


def custom_rows(sim: Sim, version: str) -> list[dict[str, object]]:
    if version == "0.35.0":
        text = sim("secret", "ls", "my-agent", check=True).stdout
        rows = text.split("CUSTOM SECRETS\n", 1)[1].splitlines()[1:]
        cells = [row.split() for row in rows if row.strip()]
        return [
            {"scope": c[0], "targets": c[1].split(","), "env": c[2], "placeholder": c[3]}
            for c in cells
        ]
    out = sim("secret", "ls", "--sandbox", "my-agent", "--json", check=True).stdout
    rows_json: list[dict[str, object]] = json.loads(out)["custom_secrets"]
    return rows_json


# Custody per generation (fast) -----------------------------------------------------------


@pytest.mark.parametrize("version", list(GENERATIONS))
def test_each_generations_custody_lines_keep_the_key_out_of_the_vm(
    version: str, tmp_path: Path
) -> None:
    _, by_version = blocks()
    lines = by_version[version]
    set_line = lines[0]
    assert set_line.startswith("sbx secret set-custom")
    assert "--placeholder proxy-managed" in set_line
    with simulator(version) as sim:
        write_key(tmp_path, CANARY)
        shell(set_line, tmp_path, sim_env(sim))
        (row,) = custom_rows(sim, version)
        assert row == {
            "scope": "my-agent",
            "targets": ["app.band.ai"],
            "env": "BAND_API_KEY",
            "placeholder": "proxy-managed",
        }
        assert CANARY in (sim.state / "keychain.json").read_text()  # sbx's host store
        assert CANARY not in sim.outputs()  # state, argv log: never the value
        (call,) = [c["argv"] for c in map(json.loads, (sim.state / "calls.jsonl").open())
                   if c["argv"][:2] == ["secret", "set-custom"]]  # fmt: skip
        if version == "0.35.0":
            assert call[-2:] == ["--value", "***"]  # the documented argv caveat
        else:
            assert "--value" not in call  # the key went on stdin
        for line in (line for line in lines if line.startswith("sbx secret rm")):
            shell(line, tmp_path, sim_env(sim))
            assert custom_rows(sim, version) == []
        assert any(line.startswith("sbx secret rm") for line in lines) == (version != "0.47.0")


# The whole direct path in a fresh clone (e2e) ----------------------------------------------


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator")), tls=True) as p:
        yield p


def trust_bundle(platform: Platform, where: Path) -> Path:
    """This host's CA bundle plus the emulator's CA (sbx's proxy verifies the platform)."""
    system = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    bundle = where / "trust.pem"
    bundle.write_text((system.read_text() if system.is_file() else "") + "\n" + platform.ca_pem)
    return bundle


def attach(
    line: str, cwd: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], list[bytes]]:
    """`sbx run --name ...` as a user runs it: on a terminal of its own, output drained."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-c", line], cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen.append(chunk)
        os.close(master)

    threading.Thread(target=drain, daemon=True).start()
    return proc, seen


def attached(output: list[bytes]) -> Callable[[], bool]:
    return lambda: b"Attached to sandbox my-agent" in b"".join(output)


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", ["0.47.0", "0.35.0"])
def test_the_direct_sbx_path_gives_a_replying_agent(
    version: str, clone: Path, platform: Platform
) -> None:
    setup, by_version = blocks()
    lines = by_version[version]
    host = "127.0.0.1"  # the README: another deployment's host instead of app.band.ai
    docker = FakeDocker(scratch_dir("fake-docker-"))
    docker.add("band-python-kit:local")  # the image `uv run invoke image.build` makes
    agent_id, key = platform.register(f"direct-{version.replace('.', '-')}")
    with simulator(version, idle_s=IDLE_S, require_templates=True) as sim:
        bundle = trust_bundle(platform, sim.scratch)
        env = sim_env(sim, {DIR_ENV: str(docker.root), "SSL_CERT_FILE": str(bundle)})
        for line in setup:
            if line == "uv run invoke image.build":
                continue  # the stand-in docker already has the image
            shell(line, clone, env)
        assert docker.saves() == 1
        yaml = YAML()
        band_yaml = clone / "my-agent" / "band.yaml"
        config = yaml.load(band_yaml.read_text())
        config["agent"]["id"] = agent_id
        config["band"]["restUrl"], config["band"]["wsUrl"] = platform.rest_url, platform.ws_url
        with band_yaml.open("w") as fh:
            yaml.dump(config, fh)
        write_key(clone, key)

        session, output = None, []
        try:
            for line in (line.replace("app.band.ai", host) for line in lines):
                if line.startswith("sbx run "):
                    session, output = attach(line, clone, env)
                    wait_for(attached(output), 60, "the attached run's greeting")
                    time.sleep(IDLE_S * 2)  # longer than the idle auto-stop: attached holds it
                    continue
                if line.startswith(("sbx rm ", "sbx secret rm", "sbx template rm")):
                    break  # the teardown lines run after the round trip
                shell(line, clone, env)
            room = platform.room_with(agent_id)
            assert platform.round_trip(room, agent_id, timeout=240).startswith("echo: ")
            rows = json.loads(sim("ls", "--json").stdout)["sandboxes"]
            assert [(r["name"], r["status"]) for r in rows] == [("my-agent", "running")]
        finally:
            if session is not None:  # Ctrl-C ends the attached run
                os.killpg(session.pid, signal.SIGINT)
                session.wait(timeout=30)
        for line in lines[lines.index(next(x for x in lines if x.startswith("sbx rm "))) :]:
            shell(line, clone, env)
        assert json.loads(sim("ls", "--json").stdout).get("sandboxes", []) == []
        assert json.loads(sim("template", "ls", "--json").stdout)["images"] == []
        assert "my-agent" not in sim("secret", "ls").stdout
        assert key not in sim.outputs()
        assert not re.search(re.escape(key), (clone / "my-agent" / "band.yaml").read_text())
    platform.delete_agent(agent_id)
