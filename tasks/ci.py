"""`ci.*`: CI plumbing (bandkit/ci/)."""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task

from tasks._common import reports


@task(
    help={"lane": "lane id from `nox -s lanes` (repeatable), or 'all'"},
    iterable=["lane"],
)
@reports("ci.prepare")
def prepare(c: Context, lane: list[str]) -> None:
    """Install the Debian packages a CI lane needs and start dockerd for Docker lanes."""
    from bandkit.ci import prepare as ci_prepare

    for line in ci_prepare.prepare(lane or ["all"]):
        print(f"ci.prepare: {line}")
