"""One lifecycle, every runtime: create -> the agent answers a mention on the emulator ->
stop -> start -> answers again -> teardown from the manifest -> nothing left (sandboxes,
secrets, policy rules, processes, platform agents), and the agent key never shows up in an
output, log, manifest or simulator state file."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bandkit import processes
from bandkit.manifest import Kind, Manifest, Resource, teardown
from bandkit.runtimes import boxnet
from bandkit.runtimes.base import Runtime, SandboxSpec, SandboxStatus, Secret
from bandkit.runtimes.docker import DockerRuntime
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sbx import SbxRuntime
from bandkit.runtimes.select import removers
from tests.fakes.simharness import Sim, simulator
from tests.runtimes.helpers import INSECURE, Platform, echo_workspace, make_kit, scratch_dir


@dataclass
class Backend:
    runtime: Runtime
    sim: Sim | None = None
    image: str | None = None


DOCKER_IMAGE: list[str] = []  # set by the `docker_image` fixture (docker param only)


@contextmanager
def local_backend(scratch: Path, manifest: Manifest) -> Iterator[Backend]:
    yield Backend(LocalRuntime(scratch / "run", manifest=manifest))


def _sim(version: str) -> Callable[[Path, Manifest], Iterator[Backend]]:
    @contextmanager
    def make(scratch: Path, manifest: Manifest) -> Iterator[Backend]:
        with simulator(version) as sim, pytest.MonkeyPatch.context() as mp:
            sim("policy", "init", "balanced", check=True)
            for key, value in sim.env.items():
                mp.setenv(key, value)
            yield Backend(SbxRuntime(manifest=manifest), sim)

    return make


@contextmanager
def docker_backend(scratch: Path, manifest: Manifest) -> Iterator[Backend]:
    yield Backend(DockerRuntime(scratch / "run", manifest=manifest), image=DOCKER_IMAGE[0])


BACKENDS = [
    pytest.param(local_backend, id="local"),
    pytest.param(_sim("0.35.0"), id="sbx-0.35"),
    pytest.param(_sim("0.47.0"), id="sbx-0.47"),
    pytest.param(docker_backend, id="docker", marks=pytest.mark.docker),
]


@pytest.mark.parametrize("make_backend", BACKENDS)
def test_lifecycle_round_trip_and_clean_teardown(
    make_backend: Callable[[Path, Manifest], Iterator[Backend]],
    platform: Platform,
    agent_sdk: None,
    request: pytest.FixtureRequest,
) -> None:
    if request.node.get_closest_marker("docker"):
        DOCKER_IMAGE[:] = [request.getfixturevalue("kit_image")]
    scratch = scratch_dir("rt-contract-")
    name = f"rt-{secrets.token_hex(3)}"
    manifest_path = scratch / "run" / "manifest.json"
    agent_key = ""
    try:
        with Manifest.open(manifest_path) as manifest, make_backend(scratch, manifest) as be:
            rt = be.runtime
            manifest.record(Kind.AGENT, name, platform=platform.rest_url)
            agent_id, agent_key = platform.register(name)
            manifest.update(manifest.find(Kind.AGENT, name), id=agent_id)  # type: ignore[arg-type]
            ws = echo_workspace(
                scratch, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
            )
            host = urlsplit(platform.rest_url).hostname or ""
            port = urlsplit(platform.rest_url).port
            spec = SandboxSpec(
                name=name,
                workspaces=(ws,),
                kit=str(make_kit(scratch)),
                image=be.image,
                # The platform is pinned host-side (never read from the workspace).
                env={
                    **INSECURE,
                    "BAND_REST_URL": platform.rest_url,
                    "BAND_WS_URL": platform.ws_url,
                },
                secrets=(
                    Secret(
                        "BAND_API_KEY",
                        (host,),
                        agent_key,
                        scopes=boxnet.band_key_scopes(platform.rest_url, platform.ws_url),
                    ),
                ),
                egress=(f"{host}:{port}",),
            )
            rt.create(spec)
            assert name in rt.list()
            room = platform.room_with(agent_id)
            assert _round_trip(platform, rt, room, agent_id, name).startswith("echo: ")

            rt.stop(name)
            assert rt.status(name) is SandboxStatus.STOPPED
            rt.start(name)
            assert rt.status(name) is SandboxStatus.RUNNING
            assert _round_trip(platform, rt, room, agent_id, name).startswith("echo: ")
            logs = rt.logs(name)
            assert "launch" in (logs.startup + logs.launcher).lower()

            def remove_agent(resource: Resource) -> None:
                if any(a["id"] == resource.details.get("id") for a in platform.agents()):
                    platform.delete_agent(resource.details["id"])

            report = teardown(manifest, {**removers([rt]), Kind.AGENT: remove_agent})
            assert report.clean, report.lines()
            kinds = {r.kind for r in report.removed}
            assert {Kind.SANDBOX, Kind.SECRET, Kind.AGENT} <= kinds
            # Nothing left.
            assert name not in rt.list()
            assert not rt.has_secret(name, host)
            assert all(a["id"] != agent_id for a in platform.agents())
            assert not manifest_path.exists()
            if be.sim is not None:
                rules = json.loads(be.sim("policy", "ls", "--json").stdout)["rules"]
                assert rules == []
                assert not list((be.sim.state / "vms").glob("*/startup.log"))
                outputs = be.sim.outputs()
            else:
                outputs = ""
            assert not _tagged_with(name)
            texts = [outputs, logs.startup, logs.launcher, *rt.warnings]
            texts += [p.read_text(errors="replace") for p in scratch.rglob("*") if _plain(p)]
            assert agent_key
            assert all(agent_key not in text for text in texts)
    finally:
        if manifest_path.exists():  # the test failed before its teardown: clean up anyway
            with Manifest.open(manifest_path) as manifest:
                runtimes: list[Runtime] = [
                    LocalRuntime(scratch / "run"),
                    SbxRuntime(),
                    DockerRuntime(scratch / "run"),
                ]
                table = removers([rt for rt in runtimes if _owns(manifest, rt)])
                table[Kind.AGENT] = lambda r: (
                    platform.delete_agent(r.details["id"]) if "id" in r.details else None
                )
                teardown(manifest, table)
        shutil.rmtree(scratch, ignore_errors=True)


def _owns(manifest: Manifest, rt: Runtime) -> bool:
    return any(r.details.get("runtime") == rt.name.value for r in manifest.resources)


def _round_trip(platform: Platform, rt: Runtime, room: str, agent_id: str, name: str) -> str:
    """A mention and its echo; on a timeout the failure carries the sandbox's logs."""
    try:
        return platform.round_trip(room, agent_id, timeout=90)
    except AssertionError as exc:
        logs = rt.logs(name)
        raise AssertionError(f"{exc}\n--- startup log\n{logs.startup[-3000:]}") from None


def _plain(path: Path) -> bool:
    return path.is_file() and path.name != "keychain.json" and "keychain" not in path.parts


def _tagged_with(name: str) -> list[int]:
    """Pids of processes whose tag names `name`."""
    tag = processes.TAG_ENV.encode() + b"="
    return processes.scan(
        lambda p: any(e.startswith(tag) and name.encode() in e for e in p.environ)
    )


@pytest.fixture(scope="module")
def tls_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    from tests.runtimes.helpers import emulator

    with emulator(Path(tmp_path_factory.mktemp("emu-tls")), tls=True) as p:
        yield p


def _plain_env_workspace(ws: Path) -> None:
    """Drop the credentials block (the launcher then takes the key from its environment,
    where the opted-in docker runtime puts it)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    config = yaml.load((ws / "band.yaml").read_text())
    del config["credentials"]
    with (ws / "band.yaml").open("w") as fh:
        yaml.dump(config, fh)


TLS_BACKENDS = [
    pytest.param("local", id="local-proxy-managed"),
    pytest.param("docker", id="docker-env-key", marks=pytest.mark.docker),
]


@pytest.mark.parametrize("kind", TLS_BACKENDS)
def test_tls_platform_round_trip(
    kind: str, tls_platform: Platform, agent_sdk: None, request: pytest.FixtureRequest
) -> None:
    """An https/wss platform with its own CA: local goes through the credential proxy
    (TLS upstream trusting the CA); docker, opted into the env-file tier, gets the key as
    env plus PROXY_CA_CERT_B64 and reaches the platform through its egress proxy."""
    platform = tls_platform
    assert platform.rest_url.startswith("https://")
    scratch = scratch_dir("rt-tls-")
    name = f"tls-{kind}-{secrets.token_hex(2)}"
    agent_id, agent_key = platform.register(name)
    try:
        ws = echo_workspace(
            scratch, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
        )
        # The platform is pinned host-side (never read from the workspace).
        spec_env = {"BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url}
        if kind == "docker":
            # The env-file tier is the operator's explicit choice for this sandbox (never
            # the workspace's); its egress proxy admits the pinned platform.
            _plain_env_workspace(ws)
            rt: Runtime = DockerRuntime(scratch / "run", key_in_container={name})
            image = request.getfixturevalue("kit_image")
        else:
            rt = LocalRuntime(scratch / "run")
            image = None
        rt.create(
            SandboxSpec(
                name=name,
                workspaces=(ws,),
                image=image,
                env=spec_env,
                secrets=(
                    Secret(
                        "BAND_API_KEY",
                        ("127.0.0.1",),
                        agent_key,
                        scopes=boxnet.band_key_scopes(platform.rest_url, platform.ws_url),
                    ),
                ),
                ca_cert_pem=platform.ca_pem,
            )
        )
        try:
            room = platform.room_with(agent_id)
            assert _round_trip(platform, rt, room, agent_id, name).startswith("echo: ")
            if kind == "docker":
                assert any("inside the container" in w for w in rt.warnings)
                env = rt.exec(name, ["env"]).stdout
                assert "PROXY_CA_CERT_B64=" in env
                bundle = rt.exec(name, ["cat", "/etc/ssl/certs/ca-certificates.crt"]).stdout
                assert platform.ca_pem.strip().splitlines()[1] in bundle  # entrypoint added it
            else:
                # The agent talks to the loopback proxy; only the proxy speaks TLS upstream.
                startup = rt.logs(name).startup
                assert "rest http://127.0.0.1:" in startup
                assert "BAND_KIT_ALLOW_INSECURE_ENDPOINTS=1" in startup
        finally:
            rt.remove(name)
        assert name not in rt.list()
    finally:
        platform.delete_agent(agent_id)
        shutil.rmtree(scratch, ignore_errors=True)
