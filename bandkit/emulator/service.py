"""The local platform as a background service: `invoke platform.up|down|status|logs`.

`up` starts `python -m bandkit.emulator` detached, with its user key in a 0600 file and
its state in a state file (both under the run directory, `.run/` by default, which git
ignores), reads the two URL lines it prints, checks `/_emulator/health`, and records
pid, URLs and file locations in the 0600 run file `platform.json`. `down` stops exactly
the recorded process (SIGTERM, then waits on a pidfd) and removes the run file; state
and key stay, so the next `up` resumes the same agents and rooms. Nothing here prints
or stores a key value; the run file only says where the key file is.

The room pages need a login link (`access.py`): `login_link` asks the running emulator
for a fresh one-time link (`POST /_emulator/login-link`, user key) for `platform.up` and
`platform.status` to print. The link goes to the caller's stdout only: it is neither in
the run file nor in the platform log (the emulator's stderr).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from bandkit import daemons
from bandkit.errors import BandkitError
from bandkit.fsio import write_private

RUN_DIR = Path(".run")
RUN_FILE = "platform.json"
KEY_FILE = "platform-user-key"
STATE_FILE = "platform-state.json"
LOG_FILE = "platform.log"
MODULE = "bandkit.emulator"


class PlatformError(BandkitError):
    """An operator-facing failure of a platform task; the message says what to do."""


@dataclass(frozen=True)
class RunRecord:
    pid: int
    rest_url: str
    ws_url: str
    user_key_file: str
    state_file: str
    log_file: str
    started_at: str
    ca_file: str | None = None


def _read_record(run_dir: Path) -> RunRecord | None:
    path = run_dir / RUN_FILE
    try:
        return RunRecord(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise PlatformError(f"run file {path} is unreadable ({exc}); remove it and retry") from None


def _is_our_emulator(pid: int) -> bool:
    return daemons.runs_module(pid, MODULE)


def running(run_dir: Path) -> RunRecord | None:
    """The record of the platform `up` started in `run_dir`, when it still runs.

    None when none was started there. A record whose process is gone raises: the caller
    would otherwise send requests to a dead URL.
    """
    record = _read_record(run_dir)
    if record is None:
        return None
    if not _is_our_emulator(record.pid):
        raise PlatformError(
            f"the local platform recorded in {run_dir / RUN_FILE} (pid {record.pid}) is not "
            "running; start it with `uv run invoke platform.up` or set BAND_REST_URL"
        )
    return record


def read_user_key(record: RunRecord) -> str:
    """The user key of a running local platform, from its 0600 key file."""
    try:
        return Path(record.user_key_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PlatformError(
            f"cannot read the local platform's key file {record.user_key_file} "
            f"({exc.strerror}); restart it with `uv run invoke platform.down platform.up`"
        ) from None


def _user_key_file(run_dir: Path) -> Path:
    path = run_dir / KEY_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"band_u_{secrets.token_urlsafe(32)}\n")
    return path


def _read_banner(proc: subprocess.Popen[bytes], timeout: float) -> list[str]:
    """The lines the emulator prints once ready (up to "Ctrl-C ..."), within `timeout`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    fd = proc.stdout.fileno()
    while b"Ctrl-C to stop.\n" not in buffer:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            raise PlatformError(f"the emulator did not report ready within {timeout:.0f}s")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise PlatformError("the emulator exited during startup")
        buffer += chunk
    return buffer.decode("utf-8", errors="replace").splitlines()


def up(
    run_dir: Path = RUN_DIR,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    tls: bool = False,
    allow_hosts: tuple[str, ...] = (),
    timeout: float = 30.0,
) -> tuple[RunRecord, bool]:
    """Start the emulator in the background (or find it running); (record, started_now).

    `host="0.0.0.0"` lets containers reach it (the recorded URLs still say 127.0.0.1);
    a container that names the host differently (a bridge gateway, host.docker.internal)
    needs that name in `allow_hosts`, or its requests are refused with 421.
    """
    existing = _read_record(run_dir)
    if existing is not None and _is_our_emulator(existing.pid):
        return existing, False
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o700)
    key_file = _user_key_file(run_dir)
    state_file, log_file = run_dir / STATE_FILE, run_dir / LOG_FILE
    argv = [
        sys.executable,
        "-m",
        MODULE,
        "--host",
        host,
        "--port",
        str(port),
        "--user-key-file",
        str(key_file),
        "--state-file",
        str(state_file),
    ]
    if tls:
        argv += ["--tls", "--tls-dir", str(run_dir / "emulator-tls")]
    for name in allow_hosts:
        argv += ["--allow-host", name]
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    record = RunRecord(
        proc.pid,
        "",
        "",
        str(key_file),
        str(state_file),
        str(log_file),
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))  # before waiting
    try:
        banner = _read_banner(proc, timeout)
    except PlatformError as exc:
        proc.terminate()
        raise PlatformError(f"{exc}; see {log_file}") from None
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    ca = next(
        (
            line.split(": ", 1)[1].split(" ")[0]
            for line in banner
            if line.startswith("CA certificate:")
        ),
        None,
    )
    record = RunRecord(
        proc.pid,
        banner[0],
        banner[1],
        str(key_file),
        str(state_file),
        str(log_file),
        record.started_at,
        ca,
    )
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))
    health(record)
    return record, True


def _control(record: RunRecord, method: str, path: str, ok: int) -> dict[str, object]:
    """One control API call with the recorded key file; PlatformError unless status `ok`."""
    key = read_user_key(record)
    verify: bool | str = record.ca_file or True
    try:
        response = httpx.request(
            method,
            f"{record.rest_url}/_emulator/{path}",
            headers={"x-api-key": key},
            timeout=5,
            verify=verify,
        )
    except httpx.HTTPError as exc:
        raise PlatformError(
            f"the emulator at {record.rest_url} does not answer: {type(exc).__name__}"
        ) from None
    if response.status_code != ok:
        raise PlatformError(
            f"the emulator at {record.rest_url} answered {path} with {response.status_code}"
        )
    data: dict[str, object] = response.json()["data"]
    return data


def health(record: RunRecord) -> dict[str, object]:
    """`GET /_emulator/health` with the recorded key file; raises PlatformError if not ok."""
    return _control(record, "GET", "health", 200)


def login_link(record: RunRecord) -> str:
    """`room pages: <link> (...)`: a fresh one-time link that signs a browser in to the
    room pages, and how long it works. For stdout only: never log or store it."""
    link = _control(record, "POST", "login-link", 201)
    minutes = round(int(str(link["expires_in"])) / 60)
    return (
        f"room pages: {link['url']} (login link: works once, {minutes} min; "
        "`invoke platform.status` prints a fresh one)"
    )


def down(run_dir: Path = RUN_DIR, *, timeout: float = 15.0) -> str:
    """Stop the recorded emulator (SIGTERM, bounded wait, then SIGKILL); remove the run file."""
    record = _read_record(run_dir)
    if record is None:
        return "not running (no run file)"
    if not _is_our_emulator(record.pid):
        (run_dir / RUN_FILE).unlink()
        return f"not running (pid {record.pid} is gone); removed the stale run file"
    outcome = daemons.stop(record.pid, timeout=timeout)
    (run_dir / RUN_FILE).unlink()
    return f"{outcome}; state kept in {record.state_file}"


def status(run_dir: Path = RUN_DIR) -> list[str]:
    record = _read_record(run_dir)
    if record is None or not _is_our_emulator(record.pid):
        return ["platform: not running (`invoke platform.up` starts it)"]
    lines = [
        f"platform: running, pid {record.pid}, since {record.started_at}",
        f"REST: {record.rest_url}",
        f"WebSocket: {record.ws_url}",
        f"user key file: {record.user_key_file}",
        f"state file: {record.state_file}",
        f"log: {record.log_file}",
    ]
    if record.ca_file:
        lines.append(f"CA certificate: {record.ca_file}")
    try:
        info = health(record)
        lines.append(
            f"health: {info['status']}; {info['agents']} agents, {info['rooms']} rooms, "
            f"{info['messages']} messages, {info['sockets']} sockets, "
            f"{info.get('unhandled', 0)} unhandled requests"
        )
        lines.append(login_link(record))
    except PlatformError as exc:
        lines.append(f"health: {exc}")
    return lines


def logs(run_dir: Path = RUN_DIR, *, lines: int = 50) -> str:
    path = run_dir / LOG_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise PlatformError(f"no log at {path}; `invoke platform.up` first") from None
    return "\n".join(text.splitlines()[-lines:])
