"""The image's promises, checked in real containers through the real entrypoint."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from bandkit.image.bases import ensure_bases, python_tag
from bandkit.image.facts import (
    host_arch,
    official_python_base,
    official_python_version,
    official_suite,
    uv_version,
)
from launcher.constants import AGENT_HOME, AGENT_UID, DEFAULT_SDK_HOME
from tests.support.images import HOME_OVERRIDE

from .conftest import run

pytestmark = pytest.mark.docker


def _status(container: str) -> dict[str, str]:
    """PID 1's /proc status, read from outside the workload (not `exec whoami`)."""
    out = subprocess.run(
        ["docker", "exec", container, "cat", "/proc/1/status"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


def test_pid1_runs_as_agent_uid_with_no_capabilities(container: str) -> None:
    status = _status(container)
    assert status["Uid"].split() == [str(AGENT_UID)] * 4
    assert status["Gid"].split() == [str(AGENT_UID)] * 4
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, cap
    assert status["NoNewPrivs"].strip() == "1"
    top = subprocess.run(
        ["docker", "top", container, "-o", "pid,uid,args"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.splitlines()
    assert [line.split()[1] for line in top[1:]] == [str(AGENT_UID)]
    assert "sleep 300" in top[1]


def test_sdk_venv_and_uv_are_read_only_and_off_path(kit_image: str) -> None:
    script = r"""
set -u
echo "path=$PATH"
echo "python_on_path=$(command -v python || echo none)"
echo "uv_on_path=$(command -v uv || echo none)"
touch "$BAND_SDK_HOME/venv/probe" 2>/dev/null && echo venv=writable || echo venv=readonly
touch "$BAND_SDK_HOME/bin/probe" 2>/dev/null && echo bin=writable || echo bin=readonly
echo "sp=$(find "$BAND_SDK_HOME" -writable | wc -l)"
echo "uv=$("$BAND_SDK_UV" --version)"
echo "home=$HOME uid=$(id -u)"
"""
    proc = run(kit_image, "bash", "-c", script)
    assert proc.returncode == 0, proc.stderr
    facts = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert DEFAULT_SDK_HOME not in facts["path"]
    assert facts["python_on_path"] == "none" or DEFAULT_SDK_HOME not in facts["python_on_path"]
    assert facts["uv_on_path"] == "none"
    assert facts["venv"] == "readonly"
    assert facts["bin"] == "readonly"
    assert facts["sp"] == "0"
    assert facts["uv"].startswith(f"uv {uv_version()}")
    assert facts["home"] == f"{AGENT_HOME} uid={AGENT_UID}"


def test_sdk_python_imports_band_and_launcher_from_compiled_bytecode(kit_image: str) -> None:
    code = "import band, launcher; print(band.__file__); print(launcher.__file__)"
    # -v logs where each module's code comes from: a shipped, valid .pyc or the source.
    proc = run(kit_image, "bash", "-c", f'exec "$BAND_SDK_PYTHON" -v -c "{code}"')
    assert proc.returncode == 0, proc.stderr[-2000:]
    band_file, launcher_file = proc.stdout.split()
    assert band_file.startswith(f"{DEFAULT_SDK_HOME}/venv/")
    assert launcher_file.startswith(f"{DEFAULT_SDK_HOME}/venv/")  # installed, not editable
    venv = f"{DEFAULT_SDK_HOME}/venv/"
    from_pyc = [line for line in proc.stderr.splitlines() if "code object from" in line]
    assert any(venv in line and ".pyc" in line for line in from_pyc)
    compiled_now = [line for line in from_pyc if venv in line and not line.endswith(".pyc'")]
    assert compiled_now == []  # nothing recompiled at start: a read-only venv could not cache it


def test_console_script_shebangs_point_at_the_final_venv(kit_image: str) -> None:
    script = 'for f in "$BAND_SDK_HOME"/venv/bin/*; do head -c2 "$f" | grep -q "#!" && head -1 "$f"; done'  # noqa: E501
    proc = run(kit_image, "bash", "-c", script)
    assert proc.returncode == 0, proc.stderr
    shebangs = set(proc.stdout.splitlines())
    assert shebangs, "no console scripts found"
    assert shebangs == {f"#!{DEFAULT_SDK_HOME}/venv/bin/python"}, shebangs


def test_customer_conflicting_pin_leaves_the_sdk_venv_untouched(kit_image: str) -> None:
    fingerprint = 'find "$BAND_SDK_HOME" -type f -printf "%p %s %T@\\n" | sort | md5sum'
    script = f"""
set -euo pipefail
before=$({fingerprint})
"$BAND_SDK_UV" venv --quiet "$HOME/ws/.venv"
# 0.27: older than the SDK's, and importable on 3.12 and 3.13 (0.23 needs the removed cgi)
"$BAND_SDK_UV" pip install --quiet --python "$HOME/ws/.venv/bin/python" httpx==0.27.0
echo "customer=$("$HOME/ws/.venv/bin/python" -c 'import httpx; print(httpx.__version__)')"
echo "sdk=$("$BAND_SDK_PYTHON" -c 'import httpx; print(httpx.__version__)')"
after=$({fingerprint})
[[ "$before" == "$after" ]] && echo untouched=yes || echo untouched=no
"""
    # Reaching PyPI from the container: trust what the host trusts (an intercepting proxy).
    proc = run(
        kit_image,
        "bash",
        "-c",
        script,
        env={"SSL_CERT_FILE": "/tmp/host-ca.crt"},
        docker_args=["--volume", "/etc/ssl/certs/ca-certificates.crt:/tmp/host-ca.crt:ro"],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    facts = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert facts["customer"] == "0.27.0"
    assert facts["sdk"] != "0.27.0"
    assert re.match(r"^\d+\.\d+", facts["sdk"])
    assert facts["untouched"] == "yes"


def test_sdk_home_override_still_starts(sdk_home_image: str) -> None:
    proc = run(
        sdk_home_image,
        "bash",
        "-c",
        'echo "$BAND_SDK_PYTHON"; "$BAND_SDK_PYTHON" -c "import band, launcher"; id -u',
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{HOME_OVERRIDE}/venv/bin/python", str(AGENT_UID)]


def test_sdk_extra_bakes_one_extra_into_the_sdk_venv(kit_image: str, sdk_extra_image: str) -> None:
    code = "import importlib.util as u; print(bool(u.find_spec('rich')), bool(u.find_spec('band')))"
    with_extra = run(sdk_extra_image, "bash", "-c", f'exec "$BAND_SDK_PYTHON" -c "{code}"')
    without = run(kit_image, "bash", "-c", f'exec "$BAND_SDK_PYTHON" -c "{code}"')
    assert with_extra.returncode == 0, with_extra.stderr
    assert with_extra.stdout.split() == ["True", "True"]
    assert without.stdout.split() == ["False", "True"]


def test_missing_sdk_interpreter_fails_closed(kit_image: str) -> None:
    proc = run(kit_image, "bash", "-c", "echo RAN", env={"BAND_SDK_PYTHON": "/nonexistent/python"})
    assert proc.returncode == 1
    assert "RAN" not in proc.stdout
    assert proc.stderr.strip() == (
        "[band-python-kit] ERROR: SDK interpreter not found at /nonexistent/python"
    )


def test_build_ca_stays_in_the_builder_and_labels_are_set(kit_image: str) -> None:
    """The host CA bundle fed to the build (conftest) must not reach the runtime image."""
    count = [
        "--entrypoint",
        "grep",
        "-c",
        "BEGIN CERTIFICATE",
        "/etc/ssl/certs/ca-certificates.crt",
    ]

    def certs(image: str) -> int:
        proc = subprocess.run(
            ["docker", "run", "--rm", *count[:2], image, *count[2:]],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return int(proc.stdout)

    assert certs(kit_image) == certs(python_tag(host_arch()))
    labels = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", kit_image],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    )
    assert labels["org.opencontainers.image.title"] == "band-python-kit"
    assert labels["org.opencontainers.image.licenses"] == "MIT"
    assert labels["org.opencontainers.image.source"].startswith("https://github.com/")
    assert labels["org.opencontainers.image.description"]


RELEASE_AND_PYTHON = (
    '. /etc/os-release; echo "$VERSION_CODENAME"; '
    'python3 -c "import platform; print(platform.python_version())"'
)


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_local_base_is_the_official_debian_release(arch: str) -> None:
    """Official (the Dockerfile's pin) against local (read inside the image); run with -rP."""
    base = python_tag(arch)
    ensure_bases((arch,), progress=lambda _line: None)  # waits while another run makes it
    proc = subprocess.run(
        ["docker", "run", "--rm", f"--platform=linux/{arch}", base, "sh", "-c", RELEASE_AND_PYTHON],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    suite, python = proc.stdout.split()
    print(
        f"official: Debian {official_suite()}, Python {official_python_version()} "
        f"({official_python_base().split('@')[0]}, the Dockerfile's pin)"
    )
    print(f"local:    Debian {suite}, Python {python} ({base}, {arch}, read inside the image)")
    assert suite == official_suite()
    # The one difference left: Debian's own Python minor (the README says so).
    assert python.split(".")[0] == official_python_version().split(".")[0]
    assert tuple(map(int, python.split(".")[:2])) >= (3, 11)  # what the SDK project allows


def test_kit_image_runs_the_local_bases_python(kit_image: str) -> None:
    probe = [
        "bash",
        "-c",
        'exec "$BAND_SDK_PYTHON" -c "import platform; print(platform.python_version())"',
    ]
    kit = run(kit_image, *probe)
    base = subprocess.run(
        ["docker", "run", "--rm", python_tag(host_arch()), "python3", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert kit.returncode == 0, kit.stderr
    assert base.stdout.split() == ["Python", kit.stdout.strip()]
