"""The swarm bench counts the engine's overlay bulk-sync stalls of a `fleet.up`, a drain
and a rollout from the nodes' daemon logs: only `Bulk sync to node ... timed out` lines,
only within the step's window, whatever digits Go left in the fraction, and a node
without a log counts none."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from bandkit.bench.swarm import _stalls
from bandkit.cluster import Cluster, Layout
from bandkit.cluster.layout import nodes

LOG = """\
time="2026-12-06T19:24:25.428941385Z" level=error msg="fatal task error" error="task: exit (1)"
time="2026-12-06T19:24:39.095098522Z" level=error msg="Bulk sync to node f1a3a69cc6d9 timed out"
time="2026-12-06T19:24:39.5Z" level=error msg="Bulk sync to node 8645b70c8e41 timed out"
time="2026-12-06T19:26:00Z" level=error msg="Bulk sync to node f1a3a69cc6d9 timed out"
msg="Bulk sync to node f1a3a69cc6d9 timed out" without a time
"""


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_stalls_in_the_window_of_each_node_with_a_log(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    made = Cluster(layout, nodes(3), 1)
    for node in made.nodes[:2]:
        layout.node_dir(node).mkdir(parents=True)
        layout.log(node).write_text(LOG, encoding="utf-8")
    # node3 has no log: nothing to count there, no error
    window = (_at("2026-12-06T19:24:00+00:00"), _at("2026-12-06T19:25:00+00:00"))
    assert _stalls(made, *window) == 4  # two in the window on each of two nodes
    assert _stalls(made, window[0], _at("2026-12-06T19:24:39.2+00:00")) == 2
    assert _stalls(made, _at("2026-12-06T19:27:00+00:00"), _at("2026-12-06T19:28:00+00:00")) == 0
