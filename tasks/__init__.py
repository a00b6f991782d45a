"""Operator verbs: `invoke --list` shows them, `invoke <task> --help` explains each.

Tasks stay thin: parse options, call one function in `bandkit/`, print its result. Each
namespace is one module here and one `bandkit` subpackage: `image` → `bandkit/image/`,
`kit` → `bandkit/kit/`, `platform` (tasks/emulator.py) → `bandkit/emulator/`, `ci` → `bandkit/ci/`.
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
from tasks import ci, demo, emulator, image, kit, llm, release, sandbox_smoke, shortcuts
from tasks._common import RUN_DIR_DEFAULT, reports


@task
@reports("doctor")
def doctor(c: Context) -> None:
    """Check the tools the kit uses and say what each missing one disables.

    Exits 0 when only optional tools (docker, sbx) are missing; 1 when uv, git or a
    recent enough Python is missing.
    """
    results = doctor_mod.probe_all()
    print(doctor_mod.render(results))
    missing = doctor_mod.missing_required(results)
    if missing:
        raise BandkitError(f"required tool(s) missing: {', '.join(missing)}; install them")


ns = Collection(doctor)
ns.add_task(shortcuts.build)
ns.add_task(shortcuts.push)
ns.add_collection(Collection.from_module(ci))
ns.add_collection(Collection.from_module(image))
ns.add_collection(Collection.from_module(kit))
ns.add_collection(Collection.from_module(emulator, name="platform"))
ns.add_collection(Collection.from_module(demo))
ns.add_collection(Collection.from_module(sandbox_smoke, name="smoke"))
ns.add_collection(Collection.from_module(llm))
ns.add_collection(Collection.from_module(release))
ns.configure({"run_dir": RUN_DIR_DEFAULT})
ns.configure(shortcuts.CONFIG)
ns.configure(release.CONFIG)
