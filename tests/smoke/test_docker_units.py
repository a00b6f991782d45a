"""The docker drills' pure parts (no daemon): the endpoint a reconnect must restore, the
agent log's backoff and watchdog records."""

from __future__ import annotations

from bandkit.runtimes.docker import Endpoint
from smoke import drills as dr

INSPECTED = {
    "IPAMConfig": {"IPv4Address": "172.30.0.9", "LinkLocalIPs": ["169.254.1.2"]},
    "Links": ["db:database"],
    "Aliases": ["abcdef012345", "agent", "box"],
    "MacAddress": "02:42:ac:1e:00:09",
    "DriverOpts": {"com.example.opt": "1"},
    "Gateway": "172.30.0.1",
    "IPAddress": "172.30.0.9",
}


def test_endpoint_reconnect_args_restore_aliases_pins_links_and_options() -> None:
    ep = Endpoint.from_inspect("bandkit-box-1", "abcdef0123456789", INSPECTED)
    assert ep.aliases == ("agent", "box")  # the container's own short id: docker adds it
    assert ep.connect_args() == [
        *("--alias", "agent", "--alias", "box"),
        *("--ip", "172.30.0.9", "--link-local-ip", "169.254.1.2"),
        *("--link", "db:database", "--driver-opt", "com.example.opt=1"),
    ]
    assert "172.30.0.9 via 172.30.0.1" in str(ep)


def test_endpoint_same_as_compares_config_and_address() -> None:
    def endpoint(**changed: object) -> Endpoint:
        return Endpoint.from_inspect("net", "abcdef0123456789", {**INSPECTED, **changed})

    before = endpoint()
    moved = endpoint(IPAddress="172.30.0.3")
    lost_alias = endpoint(Aliases=[])
    stopped = endpoint(IPAddress="", Gateway="")
    assert before.same_as(before)
    assert not moved.same_as(before)
    assert not lost_alias.same_as(before)
    assert stopped.same_as(before)  # a stopped container holds no address: config only


def test_agent_log_counts_watchdog_and_backoff_since_the_mark() -> None:
    lines = [
        "x smoke-agent INFO SDK reconnect delay 9.00s (attempt 4)",  # before the mark
        "x band.client.streaming.watchdog WARNING [WebSocket] No heartbeat ack within 60.00s",
        "x smoke-agent INFO SDK reconnect delay 0.56s (attempt 1)",
        "x smoke-agent INFO SDK reconnect delay 37.94s (attempt 3)",
    ]

    class Fake(dr.Box):
        def log_lines(self) -> list[str]:
            return lines

    seen = dr.AgentLog.since(Fake(runtime=None, name="smoke-x"), 1)  # type: ignore[arg-type]
    assert (seen.watchdog_fired, seen.backoff_s) == (1, [0.56, 37.94])
    assert seen.notes() == [
        "the SDK's heartbeat watchdog fired 1 time(s)",
        "SDK reconnect backoff: 2 wait(s) of 0.6, 37.9s",
    ]
