"""The pinned codex CLI without npm (`bandkit.demo.codex_fetch`), against a real HTTP
registry on 127.0.0.1 serving packed tarballs: the lock's package for this CPU is fetched,
checked against the lock's integrity and unpacked; a tampered or escaping tarball, a lock
that drifted from package.json and an unreachable registry are refused by name with
nothing unpacked. The script runs with the standard library alone, as the CLI image's
codex stage runs it, and the local runtime's install (`codex_local`) fetches once per lock
and replaces an earlier kit's npm layout."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bandkit.demo import DemoError, codex_local
from bandkit.demo.codex_fetch import CodexFetchError, Pin, fetch, npm_cpu, read_pin
from bandkit.image.facts import REPO_ROOT

VERSION = "9.8.7"
TARGET = "x86_64-unknown-linux-musl"
SCRIPT = REPO_ROOT / "bandkit" / "demo" / "codex_fetch.py"


def _tgz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _package(codex: bytes = b"#!/bin/sh\necho codex-cli 9.8.7\n") -> bytes:
    vendor = f"package/vendor/{TARGET}"
    return _tgz(
        {
            "package/package.json": b"{}",
            f"{vendor}/codex-package.json": b"{}",
            f"{vendor}/bin/codex": codex,
            f"{vendor}/codex-path/rg": b"rg",
        }
    )


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _lock(folder: Path, tarball: bytes, *, pinned: str = VERSION) -> Path:
    """A package.json and lock of the shape npm writes for @openai/codex."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"dependencies": {"@openai/codex": pinned}}))
    packages: dict[str, object] = {
        "": {"dependencies": {"@openai/codex": pinned}},
        "node_modules/@openai/codex": {
            "version": VERSION,
            "integrity": _integrity(b"the js shim"),
            "optionalDependencies": {
                f"@openai/codex-linux-{cpu}": f"npm:@openai/codex@{VERSION}-linux-{cpu}"
                for cpu in ("x64", "arm64")
            },
        },
    }
    for cpu in ("x64", "arm64"):
        packages[f"node_modules/@openai/codex-linux-{cpu}"] = {
            "name": "@openai/codex",
            "version": f"{VERSION}-linux-{cpu}",
            "integrity": _integrity(tarball),
            "cpu": [cpu],
            "os": ["linux"],
            "optional": True,
        }
    lock = {"lockfileVersion": 3, "packages": packages}
    (folder / "package-lock.json").write_text(json.dumps(lock))
    return folder


@dataclass
class Registry:
    url: str
    served: dict[str, bytes] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)


@pytest.fixture
def registry() -> Iterator[Registry]:
    state = Registry("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.asked.append(self.path)
            body = state.served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _serve(registry: Registry, tarball: bytes, cpu: str = "x64") -> str:
    path = f"/@openai/codex/-/codex-{VERSION}-linux-{cpu}.tgz"
    registry.served[path] = tarball
    return path


def test_the_lock_s_package_is_fetched_checked_and_unpacked(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _package()
    lock = _lock(tmp_path / "lock", tarball)
    path = _serve(registry, tarball)
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", registry.url + "/")  # as npm reads it
    folder = fetch(lock, tmp_path / "out", cpu="x64")
    assert registry.asked == [path]
    assert folder == tmp_path / "out" / "package" / "vendor" / TARGET
    assert (folder / "bin" / "codex").read_bytes().startswith(b"#!/bin/sh")
    assert (folder / "bin" / "codex").stat().st_mode & 0o111
    assert (folder / "codex-path" / "rg").is_file()


def test_a_tarball_that_is_not_the_locked_one_is_refused_and_nothing_is_unpacked(
    tmp_path: Path, registry: Registry
) -> None:
    lock = _lock(tmp_path / "lock", _package())
    _serve(registry, _package(codex=b"#!/bin/sh\necho pwned\n"))  # same shape, other bytes
    with pytest.raises(CodexFetchError, match=r"is not the locked package .*refused"):
        fetch(lock, tmp_path / "out", registry=registry.url, cpu="x64")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_locked_tarball_that_escapes_its_folder_is_refused(
    tmp_path: Path, registry: Registry
) -> None:
    tarball = _tgz({"package/../../escaped": b"x", "package/vendor/t/codex-package.json": b""})
    lock = _lock(tmp_path / "lock", tarball)  # even with the lock's own integrity
    _serve(registry, tarball)
    with pytest.raises(CodexFetchError, match=r"unpacking .* failed"):
        fetch(lock, tmp_path / "out", registry=registry.url, cpu="x64")
    assert not (tmp_path / "escaped").exists()


def test_a_lock_that_drifted_from_package_json_is_refused_with_the_remedy(tmp_path: Path) -> None:
    lock = _lock(tmp_path / "lock", _package(), pinned="9.9.9")
    with pytest.raises(CodexFetchError, match=r"package.json pins '9.9.9'.*npm install"):
        read_pin(lock, "x64")
    broken = tmp_path / "broken"
    _lock(broken, _package())
    (broken / "package-lock.json").write_text(json.dumps({"packages": {}}))
    with pytest.raises(CodexFetchError, match="has no 'node_modules/@openai/codex'"):
        read_pin(broken, "x64")


def test_an_unreachable_registry_names_the_variable_to_set(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    lock = _lock(tmp_path / "lock", _package())
    with pytest.raises(CodexFetchError, match="NPM_CONFIG_REGISTRY"):
        fetch(lock, tmp_path / "out", registry=closed, cpu="x64")
    with pytest.raises(CodexFetchError, match="must be an http"):
        fetch(lock, tmp_path / "out", registry="file:///etc", cpu="x64")
    (tmp_path / "taken").write_text("a file where the folder goes")
    with pytest.raises(CodexFetchError, match="cannot write the codex CLI into"):
        fetch(lock, tmp_path / "taken", registry=closed, cpu="x64")


def test_the_repo_lock_names_the_registry_tarball_per_cpu() -> None:
    lock_dir = codex_local.CODEX_LOCK_DIR
    version = json.loads((lock_dir / "package.json").read_text())["dependencies"]["@openai/codex"]
    for machine, cpu in (("x86_64", "x64"), ("aarch64", "arm64"), ("amd64", "x64")):
        pin = read_pin(lock_dir, npm_cpu(machine))
        assert pin == Pin("@openai/codex", f"{version}-linux-{cpu}", pin.integrity)
        assert pin.url("https://registry.npmjs.org") == (
            f"https://registry.npmjs.org/@openai/codex/-/codex-{version}-linux-{cpu}.tgz"
        )
    with pytest.raises(CodexFetchError, match="no Linux build for CPU 'riscv64'"):
        npm_cpu("riscv64")


def test_the_script_runs_on_the_standard_library_alone_as_the_image_stage_runs_it(
    tmp_path: Path, registry: Registry
) -> None:
    tarball = _package()
    lock = _lock(tmp_path / "lock", tarball)
    _serve(registry, tarball, cpu=npm_cpu())
    alone = tmp_path / "stage" / "codex_fetch.py"  # no bandkit beside it, no site-packages
    alone.parent.mkdir()
    alone.write_bytes(SCRIPT.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "NPM_CONFIG_REGISTRY": registry.url}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", "-S", str(alone), *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)

    done = run(str(lock), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == tmp_path / "out" / "package" / "vendor" / TARGET
    registry.served.clear()
    failed = run(str(lock), str(tmp_path / "again"))
    assert failed.returncode == 1
    assert failed.stderr.startswith("codex_fetch: downloading ")
    assert "Traceback" not in failed.stderr
    assert run("--help").returncode == 2


def test_the_local_install_fetches_once_per_lock_and_replaces_an_npm_layout(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _package()
    lock = _lock(tmp_path / "lock", tarball)
    _serve(registry, tarball, cpu=npm_cpu())
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", registry.url)
    cache = tmp_path / "cli"
    digest = hashlib.sha256((lock / "package-lock.json").read_bytes()).hexdigest()[:16]
    earlier = cache / f"codex-{digest}"  # an earlier kit's `npm ci` install, complete
    (earlier / "node_modules" / "@openai" / "codex-linux-x64" / "vendor" / TARGET / "bin").mkdir(
        parents=True
    )
    (earlier / ".complete").write_text("ok\n")
    logged: list[str] = []
    binary = codex_local.ensure_codex(cache, log=logged.append, lock_dir=lock)
    assert binary == earlier / "package" / "vendor" / TARGET / "bin" / "codex"
    assert not (earlier / "node_modules").exists()
    assert codex_local.ensure_codex(cache, log=logged.append, lock_dir=lock) == binary
    assert len(registry.asked) == 1  # once per lock
    assert len(logged) == 1
    registry.served.clear()
    with pytest.raises(DemoError, match="installing the codex CLI failed: downloading"):
        codex_local.ensure_codex(tmp_path / "other", log=logged.append, lock_dir=lock)
