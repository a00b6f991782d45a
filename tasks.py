"""Operator verbs: `invoke --list` shows them, `invoke <task> --help` explains each.

Tasks stay thin: parse options, call one function in `bandkit/`, and turn its expected
failures into `Exit("<what failed>: <what to do>", code=1)`. Namespaces appear here only
when they hold a real task.
"""

from __future__ import annotations

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit import ciprep
from bandkit import doctor as doctor_mod


@task
def doctor(c: Context) -> None:
    """Check the tools the kit uses and say what each missing one disables.

    Exits 0 when only optional tools (docker, sbx) are missing; 1 when uv, git or a
    recent enough Python is missing.
    """
    results = doctor_mod.probe_all()
    print(doctor_mod.render(results))
    missing = doctor_mod.missing_required(results)
    if missing:
        raise Exit(
            f"doctor: required tool(s) missing: {', '.join(missing)}; install them and re-run",
            code=1,
        )


@task(
    help={"lane": "lane id from `nox -s lanes` (repeatable), or 'all'"},
    iterable=["lane"],
)
def prepare(c: Context, lane: list[str]) -> None:
    """Install the Debian packages a CI lane needs and start dockerd for Docker lanes."""
    try:
        for line in ciprep.prepare(lane or ["all"]):
            print(f"ci.prepare: {line}")
    except ciprep.PrepareError as exc:
        raise Exit(f"ci.prepare: {exc}", code=1) from None


ns = Collection(doctor, Collection("ci", prepare))
