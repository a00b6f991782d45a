"""The LLM stub as a background service: `invoke llm.up|down|status|logs`.

`up` checks the scripts here first (a bad script fails the task, not a child process),
makes the run directory's key file `llm-keys` (0600, one canary key per provider, kept
across restarts so whatever injects the keys keeps working) and operator key file
`llm-operator-key` (0600: the credential of the stub's pages and `/_stub/*` routes),
starts `python -m bandkit.llm` detached with its stderr in `llm.log` and its request log
in `llm-requests.jsonl`, reads the base URL it prints, waits for `/_stub/health` (with
the operator key), and records pid, URL and file locations in the 0600 run file
`llm.json`. `login_link` asks the stub for a one-time login link to its turns page
(stdout only). `down` stops exactly the recorded process (SIGTERM, a bounded wait on a
pidfd, then SIGKILL) and removes the run file. Nothing here prints or stores a key value;
the run file says where the key files are.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from bandkit import daemons, processes
from bandkit.fsio import write_private
from bandkit.llm.cli import read_keys, read_operator_key
from bandkit.llm.errors import LLMStubError
from bandkit.llm.keys import KeyRing
from bandkit.llm.pages import OPERATOR_HEADER
from bandkit.llm.script import load_scripts

RUN_DIR = Path(".run")
RUN_FILE = "llm.json"
KEY_FILE = "llm-keys"
OPERATOR_KEY_FILE = "llm-operator-key"
LOG_FILE = "llm.log"
REQUESTS_FILE = "llm-requests.jsonl"
MODULE = "bandkit.llm"


@dataclass(frozen=True)
class RunRecord:
    pid: int
    url: str
    key_file: str
    log_file: str
    requests_file: str
    started_at: str
    scripts: list[str] = field(default_factory=list)
    operator_key_file: str = ""


def _read_record(run_dir: Path) -> RunRecord | None:
    path = run_dir / RUN_FILE
    try:
        return RunRecord(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise LLMStubError(f"run file {path} is unreadable ({exc}); remove it and retry") from None


def _is_our_stub(pid: int) -> bool:
    return daemons.runs_module(pid, MODULE)


def running(run_dir: Path) -> RunRecord | None:
    """The record of the stub `up` started in `run_dir` if it still runs, else None."""
    record = _read_record(run_dir)
    if record is None or not _is_our_stub(record.pid):
        return None
    return record


def _key_file(run_dir: Path) -> Path:
    path = run_dir / KEY_FILE
    if not path.exists():
        write_private(path, KeyRing.generate().render())
    return path


def _operator_key_file(run_dir: Path) -> Path:
    path = run_dir / OPERATOR_KEY_FILE
    if not path.exists():
        write_private(path, f"bandkit_llm_op_{secrets.token_urlsafe(32)}\n")
    return path


def _operator_headers(record: RunRecord) -> dict[str, str]:
    if not record.operator_key_file:
        raise LLMStubError(
            "the run file names no operator key file (a stub from an older version); "
            "`invoke llm.down llm.up` to restart it"
        )
    return {OPERATOR_HEADER: read_operator_key(Path(record.operator_key_file))}


def up(
    run_dir: Path = RUN_DIR,
    *,
    scripts: Sequence[Path],
    port: int = 0,
    host: str = "127.0.0.1",
    timeout: float = 30.0,
    tag: str | None = None,
) -> tuple[RunRecord, bool]:
    """Start the stub in the background (or find it running); (record, started_now).
    `tag` marks the process (`bandkit.processes`) so a run manifest can stop it."""
    paths = [Path(p).absolute() for p in scripts]
    loaded = load_scripts(paths)  # a bad script is the caller's error, here and now
    wanted = [str(p) for p in paths]
    existing = _read_record(run_dir)
    if existing is not None and _is_our_stub(existing.pid):
        if existing.scripts != wanted:
            raise LLMStubError(
                f"the LLM stub already runs (pid {existing.pid}) with scripts "
                f"{', '.join(existing.scripts)}; `invoke llm.down` first to change them"
            )
        return existing, False
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o700)
    key_file = _key_file(run_dir)
    operator_file = _operator_key_file(run_dir)
    unbound = sorted(read_keys(key_file).agents() - set(loaded.agents))
    if unbound:
        raise LLMStubError(
            f"{key_file} binds keys to agents without a script: {', '.join(unbound)}"
        )
    log_file, requests_file = run_dir / LOG_FILE, run_dir / REQUESTS_FILE
    argv = [sys.executable, "-m", MODULE]
    for path in paths:
        argv += ["--script", str(path)]
    argv += ["--host", host, "--port", str(port), "--key-file", str(key_file)]
    argv += ["--operator-key-file", str(operator_file), "--log-file", str(requests_file)]
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    files = (str(key_file), str(log_file), str(requests_file))

    def on_record(pid: int) -> None:  # before it may start (`daemons.spawn`)
        record = RunRecord(pid, "", *files, started_at, wanted, str(operator_file))
        write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))

    fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as log:
        proc = daemons.spawn(
            argv,
            log=log,
            record=on_record,
            env=None if tag is None else {**os.environ, processes.TAG_ENV: tag},
        )
    try:
        banner = daemons.read_banner(proc, timeout, what="the LLM stub", error=LLMStubError)
    except LLMStubError as exc:
        proc.terminate()
        proc.wait(5)
        (run_dir / RUN_FILE).unlink(missing_ok=True)
        raise LLMStubError(f"{exc}; the log ends with:\n{daemons.tail(log_file, 5)}") from None
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    record = RunRecord(proc.pid, banner[0], *files, started_at, wanted, str(operator_file))
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))
    wait_healthy(record, timeout)
    return record, True


def _operator_call(record: RunRecord, method: str, path: str, ok: int) -> dict[str, object]:
    """One call to the stub's own routes with the operator key; LLMStubError unless `ok`."""
    headers = _operator_headers(record)
    try:
        response = httpx.request(method, f"{record.url}{path}", headers=headers, timeout=5)
    except httpx.HTTPError as exc:
        raise LLMStubError(
            f"the LLM stub at {record.url} does not answer: {type(exc).__name__}"
        ) from None
    if response.status_code != ok:
        raise LLMStubError(
            f"the LLM stub at {record.url} answered {path} with {response.status_code}"
        )
    data: dict[str, object] = response.json()
    return data


def health(record: RunRecord) -> dict[str, object]:
    """`GET /_stub/health` with the operator key; LLMStubError unless it answers ok."""
    return _operator_call(record, "GET", "/_stub/health", 200)


def login_link(record: RunRecord) -> str:
    """`turns page: <link> (...)`: a fresh one-time link that signs a browser in to the
    turns page, and how long it works. For stdout only: never log or store it."""
    link = _operator_call(record, "POST", "/_stub/login-link", 201)
    minutes = round(int(str(link["expires_in"])) / 60)
    return (
        f"turns page: {link['url']} (login link: works once, {minutes} min; "
        "`invoke llm.status` prints a fresh one)"
    )


def wait_healthy(record: RunRecord, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return health(record)
        except LLMStubError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def environment(record: RunRecord) -> list[str]:
    """What an agent's environment needs, without a key value."""
    return [
        f"ANTHROPIC_BASE_URL={record.url}",
        f"OPENAI_BASE_URL={record.url}/v1",
        f"keys (PROVIDER=KEY lines, 0600): {record.key_file}",
    ]


def down(run_dir: Path = RUN_DIR, *, timeout: float = 15.0) -> str:
    """Stop the recorded stub (SIGTERM, bounded wait, then SIGKILL); remove the run file."""
    record = _read_record(run_dir)
    if record is None:
        return "not running (no run file)"
    if not _is_our_stub(record.pid):
        (run_dir / RUN_FILE).unlink()
        return f"not running (pid {record.pid} is gone); removed the stale run file"
    outcome = daemons.stop(record.pid, timeout=timeout)
    (run_dir / RUN_FILE).unlink()
    return f"{outcome}; request log kept in {record.requests_file}"


def status(run_dir: Path = RUN_DIR) -> list[str]:
    record = _read_record(run_dir)
    if record is None or not _is_our_stub(record.pid):
        return ["llm: not running (`invoke llm.up --script DIR|FILE` starts it)"]
    lines = [
        f"llm: running, pid {record.pid}, since {record.started_at}",
        f"URL: {record.url}",
        f"scripts: {', '.join(record.scripts)}",
        *environment(record),
        f"turns: {record.url}/ (page), {record.url}/_stub/turns (JSON), with the operator "
        f"key ({record.operator_key_file}) or a login link",
        f"log: {record.log_file}",
        f"request log: {record.requests_file}",
    ]
    try:
        info = health(record)
        agents = info.get("agents")
        names = ", ".join(str(a) for a in agents) if isinstance(agents, list) else "?"
        lines.append(f"health: {info['status']}; agents {names}; {info['requests']} requests")
        lines.append(login_link(record))
    except LLMStubError as exc:
        lines.append(f"health: {exc}")
    return lines


def logs(run_dir: Path = RUN_DIR, *, lines: int = 50, requests: bool = False) -> str:
    """The end of the stub's log, or (`requests`) of its JSONL request log."""
    path = run_dir / (REQUESTS_FILE if requests else LOG_FILE)
    if not path.exists():
        raise LLMStubError(f"no log at {path}; `invoke llm.up --script DIR|FILE` first")
    return daemons.tail(path, lines)
