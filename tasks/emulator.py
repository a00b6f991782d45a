"""`platform.*`: the local Band platform, the emulator (bandkit/emulator/)."""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task

from bandkit.terminal import printable
from tasks._common import RUN_DIR_HELP, reports, resolve_run_dir


@task(
    name="up",
    iterable=["allow_host"],
    help={
        "port": (
            "port to listen on (default: the one this run directory's platform had, so its "
            "agents find it again; the first time, a free one)"
        ),
        "host": "address to bind; 0.0.0.0 lets containers reach it (default 127.0.0.1)",
        "tls": "serve https/wss with a generated local CA",
        "allow_host": (
            "another Host name (or name:port) clients use, e.g. a bridge network's gateway; "
            "repeatable. Any Host but the bound one and loopback is refused with 421"
        ),
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("platform.up")
def platform_up(
    c: Context,
    port: int = 0,
    host: str = "127.0.0.1",
    tls: bool = False,
    allow_host: list[str] | None = None,
    run_dir: str = "",
) -> None:
    """Start the local Band platform (emulator) in the background and wait until healthy.

    A platform that stopped or died comes back on the same address from its state (same
    keys, rooms and agents). Prints a one-time login link for the room pages (stdout only,
    never the log).
    """
    from bandkit.emulator import service

    record, started = service.up(
        resolve_run_dir(c, run_dir),
        port=port,
        host=host,
        tls=tls,
        allow_hosts=tuple(allow_host or ()),
    )
    print(
        f"platform.up: {'started' if started else 'already running'} (pid {record.pid}, "
        f"platform id {record.platform_id or 'unknown'})"
    )
    print(f"BAND_REST_URL={record.rest_url}\nBAND_WS_URL={record.ws_url}")
    print(f"user key file: {record.user_key_file}")
    print(service.login_link(record))


@task(name="down", help={"run_dir": RUN_DIR_HELP})
@reports("platform.down")
def platform_down(c: Context, run_dir: str = "") -> None:
    """Stop the background platform started by platform.up; its state file is kept."""
    from bandkit.emulator import service

    print(f"platform.down: {service.down(resolve_run_dir(c, run_dir))}")


@task(name="status", help={"run_dir": RUN_DIR_HELP})
@reports("platform.status")
def platform_status(c: Context, run_dir: str = "") -> None:
    """Say whether the platform runs, where, what it holds, and a fresh room-page login link
    (no keys shown)."""
    from bandkit.emulator import service

    print("\n".join(service.status(resolve_run_dir(c, run_dir))))


@task(
    name="logs",
    help={"lines": "how many of the last lines to show (default 50)", "run_dir": RUN_DIR_HELP},
)
@reports("platform.logs")
def platform_logs(c: Context, lines: int = 50, run_dir: str = "") -> None:
    """Show the end of the background platform's log."""
    from bandkit.emulator import service

    print(printable(service.logs(resolve_run_dir(c, run_dir), lines=lines)))  # agents' requests
