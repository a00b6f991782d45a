"""Measurements of one kit image, shared by ours and the upstream-like image.

Each function takes the image tag and returns seconds or megabytes; nothing here builds.
Times are medians of `REPEATS` runs; `docker run` times include the daemon's own cost, so
they are reported beside a bare-base `docker run true` taken on the same machine.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from bandkit.bench import sized
from bandkit.dockercli import docker, image_size
from bandkit.image.facts import STARTER_DIR

REPEATS = 5
HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
MOUNTED_BUNDLE = "/run/host-ca.crt"  # the host's trust (an intercepting proxy), for uv
FIRST_LINE = "echo agent starting"
CA_STEP_SCRIPT = r"""
proxy=/usr/local/share/ca-certificates/sandbox-proxy-ca.crt
t() { local s=${EPOCHREALTIME/./}; "$@" >/dev/null; echo $(( ${EPOCHREALTIME/./} - s )); }
for _ in 1 2 3 4 5 6 7; do
  rm -f "$proxy"
  echo "plain $(t /usr/local/bin/band-entrypoint.sh true)"
  echo "ca $(PROXY_CA_CERT_B64="$B" t /usr/local/bin/band-entrypoint.sh true)"
done
"""
AGENT_ENV = {
    "WORKSPACE_DIR": "/workspace",
    "BAND_AGENT_ID": "bench-agent",
    "BAND_API_KEY": "proxy-managed",
    # Nothing listens there: the agent's first line comes before it connects.
    "BAND_REST_URL": "https://127.0.0.1:9",
    "BAND_WS_URL": "wss://127.0.0.1:9/socket",
    "SSL_CERT_FILE": MOUNTED_BUNDLE,  # the first (cold) sync reaches PyPI
}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def median_run(argv: list[str], env: dict[str, str] | None = None) -> float:
    samples = []
    for _ in range(sized(REPEATS, 1)):
        start = time.monotonic()
        subprocess.run(argv, capture_output=True, check=True, timeout=120, env=env)
        samples.append(time.monotonic() - start)
    return statistics.median(samples)


def synthetic_ca_b64() -> str:
    """A throwaway CA certificate, base64 of its PEM (as sbx passes it): the emulator's."""
    from bandkit.emulator.tls import make_ca_pem

    with tempfile.TemporaryDirectory(prefix="bandkit-bench-ca-") as tmp:
        return base64.b64encode(make_ca_pem(Path(tmp))).decode()


def size_mb(tag: str) -> float:
    return image_size(tag) / 1e6


def layers_mb(tag: str) -> list[tuple[float, str]]:
    """(MB, instruction) for each layer with content, newest first."""
    out = docker(["history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", tag], 30)
    layers = []
    for line in out.stdout.splitlines():
        size, created = line.split("\t", 1)
        match = re.match(r"^([\d.]+)([kMG]?B)$", size)
        if match is None:
            continue
        scale = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}[match[2]]
        if float(match[1]) * scale >= 1:
            layers.append((float(match[1]) * scale, created.split("#(nop)")[-1].strip()[:60]))
    return layers


SDK_PARTS_SCRIPT = (
    'cd "$BAND_SDK_HOME" && du -sb bin/uv venv'
    " && find venv -name '*.so' -print0 | du -cb --files0-from=- | tail -1"
    " && find venv -name '*.pyc' -print0 | du -cb --files0-from=- | tail -1"
    " && find venv -name '*.py' -print0 | du -cb --files0-from=- | tail -1"
)


def sdk_parts_mb(tag: str) -> dict[str, float]:
    """MB (10^6 bytes, as docker counts) of the SDK home's parts: uv, venv and its file kinds."""
    out = docker(["run", "--rm", "--entrypoint", "bash", tag, "-c", SDK_PARTS_SCRIPT], 120)
    sizes = [int(line.split()[0]) / 1e6 for line in out.stdout.splitlines()]
    return dict(zip(("uv", "venv", "venv .so", "venv .pyc", "venv .py"), sizes, strict=True))


def bare_run(base: str) -> float:
    return median_run(["docker", "run", "--rm", base, "true"])


def start(tag: str, *, with_ca: bool) -> float:
    """`docker run --rm IMG true` through the entrypoint."""
    if not with_ca:
        return median_run(["docker", "run", "--rm", tag, "true"])
    return median_run(
        ["docker", "run", "--rm", "--env", "PROXY_CA_CERT_B64", tag, "true"],
        env=_env(PROXY_CA_CERT_B64=synthetic_ca_b64()),
    )


def ca_step(tag: str) -> float:
    """What the CA adds to one entrypoint run, timed inside one container (no docker noise)."""
    proc = subprocess.run(
        ["docker", "run", "--rm", "--env", "B", "--entrypoint", "bash", tag, "-c", CA_STEP_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
        env=_env(B=synthetic_ca_b64()),
    )
    samples: dict[str, list[int]] = {"plain": [], "ca": []}
    for line in proc.stdout.splitlines():
        kind, micros = line.split()
        samples[kind].append(int(micros))
    return (statistics.median(samples["ca"]) - statistics.median(samples["plain"])) / 1e6


def pyc_count(tag: str) -> int:
    script = "find /opt/band/venv -name '*.pyc' | wc -l"
    return int(docker(["run", "--rm", "--entrypoint", "sh", tag, "-c", script], 60).stdout)


def import_time(tag: str, module: str, *, hide_pyc: bool = False) -> float:
    """A fresh container importing the SDK; `hide_pyc` makes every module compile."""
    extra = ["--env", "PYTHONPYCACHEPREFIX=/tmp/nopyc"] if hide_pyc else []
    argv = ["docker", "run", "--rm", *extra, tag, "/opt/band/venv/bin/python", "-c"]
    return median_run([*argv, f"import band, {module}"])


def first_line(tag: str, launcher_module: str) -> tuple[float, float]:
    """(cold, warm) seconds from `docker run` to the echo agent's first line, CA set.

    The agent's home is a volume kept across runs, as a sandbox keeps its disk: the first
    run syncs the workspace venv (cold), the next ones find it synced (warm).
    """
    workspace = Path(tempfile.mkdtemp(prefix="bandkit-bench-ws-"))
    volume = f"bandkit-bench-home-{uuid.uuid4().hex[:8]}"
    env = _env(PROXY_CA_CERT_B64=synthetic_ca_b64(), **AGENT_ENV)
    try:
        _stage_workspace(workspace)
        docker(["volume", "create", volume], 30)

        def argv() -> list[str]:
            out = ["docker", "run", "--rm", "--name", f"bandkit-bench-{uuid.uuid4().hex[:8]}"]
            out += ["--volume", f"{workspace}:/workspace:ro", "--volume", f"{volume}:/home/agent"]
            out += ["--volume", f"{HOST_BUNDLE}:{MOUNTED_BUNDLE}:ro"]
            for name in ("PROXY_CA_CERT_B64", *AGENT_ENV):
                out += ["--env", name]
            return [*out, tag, "/opt/band/venv/bin/python", "-m", launcher_module]

        cold = _time_to_line(argv(), env)
        warm = statistics.median(_time_to_line(argv(), env) for _ in range(sized(REPEATS, 1)))
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True, timeout=60)
        shutil.rmtree(workspace, ignore_errors=True)
    return cold, warm


def _stage_workspace(folder: Path) -> None:
    """The echo-agent starter without its custody block (no sandbox proxy here)."""
    folder.chmod(0o755)
    source = STARTER_DIR
    for name in ("main.py", "pyproject.toml", "uv.lock"):
        shutil.copy2(source / name, folder / name)
    band_yaml = (source / "band.yaml").read_text(encoding="utf-8")
    stripped = re.sub(r"^credentials:\n(?:  .*\n)+", "", band_yaml, flags=re.MULTILINE)
    (folder / "band.yaml").write_text(stripped, encoding="utf-8")
    for path in folder.iterdir():
        path.chmod(0o644)


def _time_to_line(command: list[str], env: dict[str, str]) -> float:
    name = command[command.index("--name") + 1]
    begin = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if FIRST_LINE in line:
                return time.monotonic() - begin
            seen = [*seen[-5:], line.rstrip()]
        raise RuntimeError(f"image bench: no {FIRST_LINE!r} line; last output: {seen}")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
        proc.kill()
        proc.wait(timeout=30)
