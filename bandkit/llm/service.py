"""The LLM stub as a background service: `invoke llm.up|down|status|logs`.

`up` checks the scripts here first (a bad script fails the task, not a child process),
makes the run directory's key file `llm-keys` (0600, one canary key per provider, kept
across restarts so whatever injects the keys keeps working), starts
`python -m bandkit.llm` detached with its stderr in `llm.log` and its request log in
`llm-requests.jsonl`, reads the base URL it prints, waits for `/_stub/health`, and
records pid, URL and file locations in the 0600 run file `llm.json`. `down` stops exactly
the recorded process (SIGTERM, a bounded wait on a pidfd, then SIGKILL) and removes the
run file. Nothing here prints or stores a key value; the run file says where the key
file is.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from bandkit import daemons
from bandkit.fsio import write_private
from bandkit.llm.cli import read_keys
from bandkit.llm.errors import LLMStubError
from bandkit.llm.keys import KeyRing
from bandkit.llm.script import load_scripts
from bandkit.runtimes import processes

RUN_DIR = Path(".run")
RUN_FILE = "llm.json"
KEY_FILE = "llm-keys"
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


def _read_banner(proc: subprocess.Popen[bytes], timeout: float) -> list[str]:
    """The lines the stub prints once ready (up to "Ctrl-C ..."), within `timeout`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    fd = proc.stdout.fileno()
    while b"Ctrl-C to stop.\n" not in buffer:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            raise LLMStubError(f"the LLM stub did not report ready within {timeout:.0f}s")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise LLMStubError("the LLM stub exited during startup")
        buffer += chunk
    return buffer.decode("utf-8", errors="replace").splitlines()


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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
    `tag` marks the process (`bandkit.runtimes.processes`) so a run manifest can stop it."""
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
    argv += ["--log-file", str(requests_file)]
    fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=None if tag is None else {**os.environ, processes.TAG_ENV: tag},
        )
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = RunRecord(
        proc.pid, "", str(key_file), str(log_file), str(requests_file), started_at, wanted
    )
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))  # before waiting
    try:
        banner = _read_banner(proc, timeout)
    except LLMStubError as exc:
        proc.terminate()
        proc.wait(5)
        (run_dir / RUN_FILE).unlink(missing_ok=True)
        raise LLMStubError(f"{exc}; the log ends with:\n{_tail(log_file, 5)}") from None
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    record = RunRecord(
        proc.pid, banner[0], str(key_file), str(log_file), str(requests_file), started_at, wanted
    )
    write_private(run_dir / RUN_FILE, json.dumps(asdict(record), indent=1))
    wait_healthy(record, timeout)
    return record, True


def health(record: RunRecord) -> dict[str, object]:
    """`GET /_stub/health`; LLMStubError unless it answers ok."""
    try:
        response = httpx.get(f"{record.url}/_stub/health", timeout=5)
    except httpx.HTTPError as exc:
        raise LLMStubError(
            f"the LLM stub at {record.url} does not answer: {type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        raise LLMStubError(
            f"the LLM stub at {record.url} answered health with {response.status_code}"
        )
    data: dict[str, object] = response.json()
    return data


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
        f"turns: {record.url}/ (page), {record.url}/_stub/turns (JSON)",
        f"log: {record.log_file}",
        f"request log: {record.requests_file}",
    ]
    try:
        info = health(record)
        agents = info.get("agents")
        names = ", ".join(str(a) for a in agents) if isinstance(agents, list) else "?"
        lines.append(f"health: {info['status']}; agents {names}; {info['requests']} requests")
    except LLMStubError as exc:
        lines.append(f"health: {exc}")
    return lines


def logs(run_dir: Path = RUN_DIR, *, lines: int = 50, requests: bool = False) -> str:
    """The end of the stub's log, or (`requests`) of its JSONL request log."""
    path = run_dir / (REQUESTS_FILE if requests else LOG_FILE)
    if not path.exists():
        raise LLMStubError(f"no log at {path}; `invoke llm.up --script DIR|FILE` first")
    return _tail(path, lines)
