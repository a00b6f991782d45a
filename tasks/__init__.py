"""Operator verbs: `invoke --list` shows them, `invoke <task> --help` explains each.

Tasks stay thin: parse options, call one function in `bandkit/`, print its result. Each
namespace is one module here, named for it, and one library package: `image` → `bandkit/image/`,
`kit` → `bandkit/kit/`, `ci` → `bandkit/ci/`. Two modules cannot take their namespace's name,
because invoke puts tasks/ itself on sys.path: `platform` is tasks/emulator.py (→
`bandkit/emulator/`; tasks/platform.py would shadow the standard library's `platform`) and
`smoke` is tasks/sandbox_smoke.py (→ `smoke/`, the package tasks/smoke.py would shadow).
Expected failures are `BandkitError`s; `_common.reports` turns one into
`<task>: <message>` and exit 1, never a traceback. Defaults that several tasks share (the
run directory) live once, in the collection's configuration (`ns.configure` below;
override in `invoke.yaml`).
"""

from __future__ import annotations

from invoke.collection import Collection
from invoke.context import Context
from invoke.tasks import task

from bandkit import doctor as doctor_mod
from bandkit.errors import BandkitError
from tasks import (
    ci,
    cluster,
    demo,
    emulator,
    fleet,
    image,
    kit,
    llm,
    release,
    sandbox_smoke,
    shortcuts,
)
from tasks._common import RUN_DIR_DEFAULT, RUN_DIR_HELP, reports, resolve_run_dir


@task(help={"run_dir": RUN_DIR_HELP})
@reports("doctor")
def doctor(c: Context, run_dir: str = "") -> None:
    """Check the tools the kit uses, then what a newcomer needs next, each with its fix.

    The tools table says what each missing tool disables; the lines after it check the
    kit image, the local bases, iptables, the local platform, the run directory and the
    checkout for the agent uid, and which runtime `auto` picks and why. Exits 0 when the
    default path (`demo.up`, offline, on the best runtime) can run; 1 when uv, git or a
    recent enough Python is missing, or a line says BLOCKS.
    """
    from bandkit import doctor_next
    from bandkit.image.facts import REPO_ROOT

    results = doctor_mod.probe_all()
    print(doctor_mod.render(results))
    steps = doctor_next.next_steps(doctor_next.Host(resolve_run_dir(c, run_dir), REPO_ROOT))
    print("\nnext (one line each, the fix in the line):")
    print(doctor_next.render(steps))
    missing = doctor_mod.missing_required(results)
    if missing:
        raise BandkitError(f"required tool(s) missing: {', '.join(missing)}; install them")
    blocked = doctor_next.blocking(steps)
    if blocked:
        raise BandkitError(
            f"the default path (`uv run invoke demo.up`) would fail: {', '.join(blocked)} "
            "(each line above says the fix)"
        )
    print("\ndoctor: ready: `uv run invoke demo.up` can run here, offline")


ns = Collection(doctor)
ns.add_task(shortcuts.build)
ns.add_task(shortcuts.push)
ns.add_collection(Collection.from_module(ci))
ns.add_collection(Collection.from_module(image))
ns.add_collection(Collection.from_module(cluster))
ns.add_collection(Collection.from_module(fleet))
ns.add_collection(Collection.from_module(kit))
ns.add_collection(Collection.from_module(emulator, name="platform"))
ns.add_collection(Collection.from_module(demo))
ns.add_collection(Collection.from_module(sandbox_smoke, name="smoke"))
ns.add_collection(Collection.from_module(llm))
ns.add_collection(Collection.from_module(release))
ns.configure({"run_dir": RUN_DIR_DEFAULT})
ns.configure(shortcuts.CONFIG)
ns.configure(release.CONFIG)
