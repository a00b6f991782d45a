"""`llm.*`: the local LLM stub (bandkit/llm/), the Anthropic and OpenAI APIs from scripts."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.tasks import task

from bandkit.terminal import printable
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir


@task(
    name="up",
    iterable=["script"],
    help={
        "script": (
            "a YAML script, or a directory of them, one file per agent (repeatable; "
            "schema: bandkit/llm/script.py)"
        ),
        "port": "port to listen on; 0 picks a free one (default 0)",
        "host": "address to bind; 0.0.0.0 lets containers reach it (default 127.0.0.1)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("llm.up")
def llm_up(
    c: Context,
    script: list[str] | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
    run_dir: str = "",
) -> None:
    """Start the local LLM stub in the background and wait until healthy.

    Prints the base URLs for ANTHROPIC_BASE_URL / OPENAI_BASE_URL and where the key file
    is (its keys are the only ones accepted; no key is printed), and a one-time login
    link for the turns page (the page takes the operator key or that link's session).
    """
    from bandkit.llm import service

    scripts = [Path(s) for s in (script or []) if s]
    need(",".join(map(str, scripts)), "--script", "tests/llm/scripts (a file or a directory)")
    record, started = service.up(resolve_run_dir(c, run_dir), scripts=scripts, port=port, host=host)
    print(f"llm.up: {'started' if started else 'already running'} (pid {record.pid})")
    print("\n".join(service.environment(record)))
    print(service.login_link(record))


@task(name="down", help={"run_dir": RUN_DIR_HELP})
@reports("llm.down")
def llm_down(c: Context, run_dir: str = "") -> None:
    """Stop the background LLM stub started by llm.up; its request log is kept."""
    from bandkit.llm import service

    print(f"llm.down: {service.down(resolve_run_dir(c, run_dir))}")


@task(name="status", help={"run_dir": RUN_DIR_HELP})
@reports("llm.status")
def llm_status(c: Context, run_dir: str = "") -> None:
    """Say whether the LLM stub runs, where, with which scripts, and how many requests;
    a fresh one-time login link for the turns page."""
    from bandkit.llm import service

    print("\n".join(service.status(resolve_run_dir(c, run_dir))))


@task(
    name="logs",
    help={
        "lines": "how many of the last lines to show (default 50)",
        "requests": "show the JSONL request log (keys redacted) instead of the stub's log",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("llm.logs")
def llm_logs(c: Context, lines: int = 50, requests: bool = False, run_dir: str = "") -> None:
    """Show the end of the background LLM stub's log (or of its request log)."""
    from bandkit.llm import service

    print(printable(service.logs(resolve_run_dir(c, run_dir), lines=lines, requests=requests)))
