"""Launcher start-up: process start -> the agent's first line, ours vs upstream.

Both launchers run as uid 1000 (via setpriv, so this benchmark needs root) from
one image-like SDK home (a venv on Debian's python with band-sdk and our
launcher installed, plus a copy of uv), on the same workspace with the same
band.yaml and the same warm venv, in alternating order within one run:

- ours:     `python -m launcher`
- upstream: `python -m band.docker.launcher` (band-sdk 6.0.1)

The SDK venv is byte-compiled, as the image ships it (`UV_COMPILE_BYTECODE=1`: the
venv is read-only at runtime, so a launcher run as uid 1000 can never cache .pyc
files itself); BENCH_LAUNCHER_BYTECODE=0 leaves third-party packages uncompiled
(every start then compiles pydantic, and upstream band-sdk too, from source).

The clock starts just before the process is spawned and stops when the agent's
first line arrives. "Warm" means both launchers have already launched this
workspace once (venv synced, nothing changed since). Agents measured: a trivial
`main.py` whose first statement prints a line (pure launcher overhead), and the
echo-agent starter (its first log line, written before it imports band).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bandkit.bench import sized
from bandkit.image.facts import STARTER_DIR
from bandkit.runtimes.sdk_home import SdkHome, build_sdk_home

AGENT_UID = 1000
REPETITIONS = int(os.environ.get("BENCH_LAUNCHER_REPS", "9"))
BYTECODE = os.environ.get("BENCH_LAUNCHER_BYTECODE", "1") != "0"
TIMEOUT_S = 600.0
TARGET_RATIO = 0.3
TRIVIAL_MAIN = 'print("agent first line", flush=True)\n'
TRIVIAL_PYPROJECT = """\
[project]
name = "bench-agent"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []

[tool.uv]
package = false
"""
CA_PASSTHROUGH = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
LAUNCHERS = {"ours": "launcher", "upstream": "band.docker.launcher"}


@dataclass(frozen=True)
class Case:
    name: str
    workspace: Path
    env: dict[str, str]
    first_line: Callable[[str], bool]
    stream: str  # "stdout" or "stderr": where the agent's first line appears


def _chown_tree(path: Path) -> None:
    for item in (path, *path.rglob("*")):
        os.lchown(item, AGENT_UID, AGENT_UID)


def _workspace(root: Path, name: str, sdk: SdkHome, *, starter: bool) -> Path:
    workspace = root / name / "ws"
    home = root / name / "home"
    if starter:
        shutil.copytree(
            STARTER_DIR, workspace, ignore=shutil.ignore_patterns(".venv", "__pycache__")
        )
        config = yaml.safe_load((workspace / "band.yaml").read_text())
        config["agent"]["id"] = "bench-echo"
    else:
        workspace.mkdir(parents=True)
        (workspace / "pyproject.toml").write_text(TRIVIAL_PYPROJECT)
        (workspace / "main.py").write_text(TRIVIAL_MAIN)
        subprocess.run(
            [str(sdk.uv), "lock", "--quiet", "--python", "/usr/bin/python3"],
            cwd=workspace,
            check=True,
            timeout=TIMEOUT_S,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
        config = {"schemaVersion": "1", "agent": {"id": "bench-trivial"}}
        config["credentials"] = {"source": "proxy-managed"}
    config["runtime"] = {
        "environmentPath": str(home / "venv"),
        "statePath": str(home / "state"),
        "cachePath": str(root / "uv-cache"),
        "logPath": str(home / "logs"),
    }
    (workspace / "band.yaml").write_text(yaml.safe_dump(config))
    home.mkdir(parents=True)
    return workspace


def _compile_bytecode(sdk: SdkHome) -> None:
    """Byte-compile the SDK venv's site-packages, as the image's UV_COMPILE_BYTECODE=1."""
    for site in (sdk.root / "venv" / "lib").glob("python3*/site-packages"):
        subprocess.run(
            [str(sdk.python), "-m", "compileall", "-q", "-j", "0", str(site)],
            check=True,
            timeout=TIMEOUT_S,
            stdout=subprocess.DEVNULL,
        )


def _env(sdk: SdkHome, workspace: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "WORKSPACE_DIR": str(workspace),
        "BAND_API_KEY": "proxy-managed",
        **sdk.environment(),
        **{k: v for k in CA_PASSTHROUGH if (v := os.environ.get(k))},
    }
    env.update(extra)
    return env


def time_to_first_line(sdk: SdkHome, module: str, case: Case) -> float:
    """Seconds from spawning the launcher to the agent's first line (then stop it)."""
    argv = [
        "setpriv",
        f"--reuid={AGENT_UID}",
        f"--regid={AGENT_UID}",
        "--clear-groups",
        str(sdk.python),
        "-m",
        module,
    ]
    other = subprocess.DEVNULL
    start = time.perf_counter()
    process = subprocess.Popen(
        argv,
        env=case.env,
        cwd=case.workspace,
        stdout=subprocess.PIPE if case.stream == "stdout" else other,
        stderr=subprocess.PIPE if case.stream == "stderr" else other,
        text=True,
        start_new_session=True,
    )
    stream = process.stdout if case.stream == "stdout" else process.stderr
    assert stream is not None
    try:
        for line in stream:
            if case.first_line(line):
                return time.perf_counter() - start
        raise RuntimeError(f"{module} exited {process.wait()} before the agent's first line")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 15)
        process.wait(timeout=60)
        stream.close()


def _repetitions() -> int:
    return sized(REPETITIONS, 1)


def _measure(sdk: SdkHome, case: Case) -> dict[str, list[float]]:
    for module in LAUNCHERS.values():  # warm-up: both sync the venv and, ours, stamp it
        time_to_first_line(sdk, module, case)
    samples: dict[str, list[float]] = {name: [] for name in LAUNCHERS}
    for index in range(_repetitions()):
        order = list(LAUNCHERS.items())
        if index % 2:
            order.reverse()  # alternate who goes first
        for name, module in order:
            samples[name].append(time_to_first_line(sdk, module, case))
    return samples


def _summary(case: Case, samples: dict[str, list[float]]) -> list[str]:
    ours, upstream = (statistics.median(samples[name]) for name in ("ours", "upstream"))
    ratio = ours / upstream
    verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
    return [
        f"{case.name}: median ours {ours * 1000:.0f} ms, upstream {upstream * 1000:.0f} ms "
        f"(min {min(samples['ours']) * 1000:.0f} / {min(samples['upstream']) * 1000:.0f} ms, "
        f"n={len(samples['ours'])} each)",
        f"{case.name}: ratio ours/upstream = {ratio:.2f} ({verdict} the <= {TARGET_RATIO} target)",
    ]


def run() -> list[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return ["skipped: needs root and setpriv to run both launchers as uid 1000"]
    root = Path(tempfile.mkdtemp(prefix="bench-launcher-", dir="/tmp"))
    root.chmod(0o755)
    try:
        sdk = build_sdk_home(root / "sdk", with_band_sdk=True)
        if BYTECODE:
            _compile_bytecode(sdk)
        (root / "uv-cache").mkdir()
        trivial = _workspace(root, "trivial", sdk, starter=False)
        echo = _workspace(root, "echo", sdk, starter=True)
        _chown_tree(root / "trivial")
        _chown_tree(root / "echo")
        _chown_tree(root / "uv-cache")
        cases = [
            Case(
                name="trivial agent (prints a line first)",
                workspace=trivial,
                env=_env(sdk, trivial),
                first_line=lambda line: line.startswith("agent first line"),
                stream="stdout",
            ),
            Case(
                name="echo-agent starter (first log line)",
                workspace=echo,
                env=_env(
                    sdk,
                    echo,
                    BAND_REST_URL="https://127.0.0.1:9",
                    BAND_WS_URL="wss://127.0.0.1:9/api/v1/socket/websocket",
                ),
                first_line=lambda line: "echo agent starting" in line,
                stream="stderr",
            ),
        ]
        bytecode = "byte-compiled, as the image" if BYTECODE else "NOT byte-compiled"
        lines = [
            f"setup: both launchers as uid {AGENT_UID} via setpriv, SDK venv on /usr/bin/python3 "
            f"({bytecode}), "
            f"same workspace and warm venv, alternating, {_repetitions()} runs each, "
            f"{os.cpu_count()} CPUs",
        ]
        for case in cases:
            lines += _summary(case, _measure(sdk, case))
            log = (case.workspace.parent / "home" / "logs" / "launcher.log").read_text()
            skipped = log.count("launcher.sync INFO phase sync: skipped uv")
            lines.append(
                f"{case.name}: ours skipped uv (fast path) in {skipped} of {_repetitions()} "
                "timed launches"
            )
        return lines
    finally:
        shutil.rmtree(root, ignore_errors=True)
