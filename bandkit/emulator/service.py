"""The local platform as a background service: `invoke platform.up|down|status|logs`.

`up` starts `python -m bandkit.emulator` detached, with its user key in a 0600 file and
its state in a state file (both under the run directory, `.run/` by default, which git
ignores), reads the two URL lines it prints, checks `/_emulator/health`, and records
pid, URLs, the platform's id and file locations in the 0600 run file `platform.json`.
`down` stops exactly the recorded process (SIGTERM, then waits on a pidfd) and removes
the run file; state and key stay, so the next `up` resumes the same agents and rooms.
Nothing here prints or stores a key value; the run file only says where the key file is.

A platform keeps its identity across restarts: its id lives in its state (`platform_id`),
and its address in `platform-address.json` (0600, kept by `down`), so `up` in a run
directory whose platform stopped or died (`kill -9`, an OOM kill, a reboot) listens on
the same port again, from the same state: same keys, rooms and agents, and the agents'
boxes, still pointed at that address, reconnect by themselves. A port someone else took
meanwhile is a `PlatformError` saying so and what to do; `--port` moves it on purpose.

The room pages need a login link (`access.py`): `login_link` asks the running emulator
for a fresh one-time link (`POST /_emulator/login-link`, user key) for `platform.up` and
`platform.status` to print; `mint_login` one that lands on a room's page (`demo.up`).
The link goes to the caller's stdout only: it is neither in the run file nor in the
platform log (the emulator's stderr).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bandkit import daemons
from bandkit.errors import BandkitError, conceal
from bandkit.fsio import write_private

RUN_DIR = Path(".run")
RUN_FILE = "platform.json"
KEY_FILE = "platform-user-key"
STATE_FILE = "platform-state.json"
LOG_FILE = "platform.log"
ADDRESS_FILE = "platform-address.json"
MODULE = "bandkit.emulator"
PORT_WAIT_S = 2.0  # how long `up` waits for its old port to be let go of


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
    platform_id: str = ""  # the id in its state (`GET /_emulator/health`)


@dataclass(frozen=True)
class Address:
    """Where the platform of a run directory listens, kept across its restarts."""

    host: str
    port: int
    tls: bool
    platform_id: str = ""
    allow_hosts: tuple[str, ...] = ()


def read_address(run_dir: Path) -> Address | None:
    """The address the platform of `run_dir` last listened on; None when never started."""
    path = run_dir / ADDRESS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["allow_hosts"] = tuple(str(name) for name in data.get("allow_hosts", ()))
        address = Address(**data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        raise PlatformError(
            f"{path} is unreadable; remove it (the next `platform.up` picks a new port: "
            "agents provisioned on the old one then need provisioning again)"
        ) from None
    if not isinstance(address.port, int) or not 0 < address.port < 65536:
        raise PlatformError(f"{path} names no valid port; remove it and retry")
    return address


def state_identity(state_file: Path) -> str | None:
    """The platform id a state file holds: None when there is no such file, "" when it
    predates ids (it gets one at its next start) or cannot be read as a state."""
    try:
        data = json.loads(state_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return ""
    value = data.get("platform_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def last_record(run_dir: Path) -> tuple[RunRecord | None, bool]:
    """(the run file's record, whether its process still runs): a platform that died
    without `down` leaves its record, which says where its key and state are."""
    record = _read_record(run_dir)
    return record, record is not None and _is_our_emulator(record.pid)


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
            f"running; `uv run invoke platform.up` starts it again on {record.rest_url}, "
            "from its state (or set BAND_REST_URL)"
        )
    return record


def read_user_key(record: RunRecord) -> str:
    """The user key of a running local platform, from its 0600 key file."""
    try:
        key = Path(record.user_key_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PlatformError(
            f"cannot read the local platform's key file {record.user_key_file} "
            f"({exc.strerror}); restart it with `uv run invoke platform.down platform.up`"
        ) from None
    conceal(key)
    return key


def _user_key_file(run_dir: Path) -> Path:
    path = run_dir / KEY_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"band_u_{secrets.token_urlsafe(32)}\n")
    return path


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

    `port=0` means the port this run directory's platform had before (`ADDRESS_FILE`),
    else a free one; a port that is taken is a PlatformError naming it, never another
    port in silence (the agents would not find their platform).

    `host="0.0.0.0"` lets containers reach it (the recorded URLs still say 127.0.0.1);
    a container that names the host differently (a bridge gateway, host.docker.internal)
    needs that name in `allow_hosts`, or its requests are refused with 421.
    """
    existing = _read_record(run_dir)
    if existing is not None and _is_our_emulator(existing.pid):
        return existing, False
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o700)
    before = _previous_port(run_dir, existing)
    port = port or before
    if port:
        _check_free(host, port, run_dir, before=port == before)
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
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def on_record(pid: int) -> None:  # before it may start (`daemons.spawn`)
        record = RunRecord(pid, "", "", str(key_file), str(state_file), str(log_file), started_at)
        write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))

    with log_file.open("ab") as log:
        proc = daemons.spawn(argv, log=log, record=on_record)
    try:
        banner = daemons.read_banner(proc, timeout, what="the emulator", error=PlatformError)
    except PlatformError as exc:
        proc.terminate()
        raise PlatformError(f"{exc}{_startup_failure(log_file)}; see {log_file}") from None
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
        started_at,
        ca,
    )
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))
    info = health(record)
    record = RunRecord(**{**asdict(record), "platform_id": str(info.get("platform_id") or "")})
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))
    bound = urlsplit(record.rest_url).port or 0
    address = Address(host, bound, tls, record.platform_id, tuple(allow_hosts))
    write_private(run_dir / ADDRESS_FILE, json.dumps(asdict(address), indent=1))
    return record, True


def up_again(run_dir: Path = RUN_DIR) -> tuple[RunRecord, bool]:
    """`up` as the platform of `run_dir` was last started (host, TLS, allowed hosts, port):
    what `kit.resume` and a teardown use to bring back a platform that stopped."""
    previous = read_address(run_dir)
    if previous is None:
        return up(run_dir)
    return up(
        run_dir,
        port=previous.port,
        host=previous.host,
        tls=previous.tls,
        allow_hosts=previous.allow_hosts,
    )


def _previous_port(run_dir: Path, existing: RunRecord | None) -> int:
    """The port the platform of `run_dir` had (kept by `down`; else the run file a dead
    one left says it); 0 when it never ran here."""
    previous = read_address(run_dir)
    if previous is not None:
        return previous.port
    if existing is not None:
        return urlsplit(existing.rest_url).port or 0
    return 0


def _check_free(host: str, port: int, run_dir: Path, *, before: bool) -> None:
    """Fail with what to do when another process holds the platform's port (after
    `PORT_WAIT_S`: a platform killed a moment ago may not have let go of it yet)."""
    deadline = time.monotonic() + PORT_WAIT_S
    while True:
        try:
            daemons.listen(host, port, backlog=1).close()
            return
        except daemons.BindError as exc:
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            if not before:
                raise PlatformError(str(exc)) from None
        raise PlatformError(
            f"port {port} on {host}, where the local platform of {run_dir} listened before "
            "(its agents and records use that address), is taken by another process. "
            f"Free it (`ss -ltnp 'sport = :{port}'` shows which process holds it) and re-run "
            "`uv run invoke platform.up`; or move the platform with `platform.up --port N` "
            "(agents provisioned on the old port then need provisioning again)"
        )


def _startup_failure(log_file: Path) -> str:
    """The emulator's own reason for exiting during startup (its `emulator: ...` line)."""
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    reasons = [line for line in lines[-20:] if line.startswith("emulator: ")]
    return f" ({reasons[-1]})" if reasons else ""


def _control(
    record: RunRecord,
    method: str,
    path: str,
    ok: int,
    params: dict[str, str] | None = None,
) -> dict[str, object]:
    """One control API call with the recorded key file; PlatformError unless status `ok`."""
    key = read_user_key(record)
    verify: bool | str = record.ca_file or True
    try:
        response = httpx.request(
            method,
            f"{record.rest_url}/_emulator/{path}",
            params=params,
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


def mint_login(record: RunRecord, *, lands: str | None = None) -> tuple[str, int]:
    """(a fresh one-time login link, the minutes it works), landing on `lands` (a room's
    page, `/rooms/<id>`) when given. For a terminal only: never log or store the link."""
    params = None if lands is None else {"next": lands}
    link = _control(record, "POST", "login-link", 201, params=params)
    return str(link["url"]), round(int(str(link["expires_in"])) / 60)


def login_link(record: RunRecord) -> str:
    """`room pages: <link> (...)`: a fresh one-time link that signs a browser in to the
    room pages, and how long it works. For stdout only: never log or store it."""
    url, minutes = mint_login(record)
    return (
        f"room pages: {url} (login link: works once, {minutes} min; "
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
        return [_not_running(run_dir)]
    lines = [
        f"platform: running, pid {record.pid}, since {record.started_at}",
        f"platform id: {record.platform_id or '(unknown)'}",
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


def _not_running(run_dir: Path) -> str:
    address = read_address(run_dir)
    identity = state_identity(run_dir / STATE_FILE)
    if address is None or identity is None:
        return "platform: not running (`invoke platform.up` starts it)"
    return (
        f"platform: not running; its state ({identity or 'platform'}) is in "
        f"{run_dir / STATE_FILE}: `invoke platform.up` brings it back on port {address.port}"
    )


def logs(run_dir: Path = RUN_DIR, *, lines: int = 50) -> str:
    path = run_dir / LOG_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise PlatformError(f"no log at {path}; `invoke platform.up` first") from None
    return "\n".join(text.splitlines()[-lines:])
