"""`build` and `push`: the short path a newcomer types, `uv run invoke build push`.

No options needed: `build` makes the kit image for this machine, `push` publishes it and
writes the digest-pinned `dist/spec.yaml` (bandkit/kit/build_push.py says how each
default is chosen). `image.build` / `image.push` keep every option; `build --no-cache`
is the one extra here.
"""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task

from bandkit.image.facts import REGISTRY_SETTING
from tasks._common import RUN_DIR_HELP, reports, resolve_run_dir

CONFIG = {REGISTRY_SETTING: ""}  # the collection's default (tasks/__init__.py): none


@task(help={"no_cache": "rebuild every layer (the bases stay)"})
@reports("build")
def build(c: Context, no_cache: bool = False) -> None:
    """Build the kit image for this machine (official bases, else local ones)."""
    from bandkit.kit import build_push as shortcuts

    built = shortcuts.build_here(note=lambda line: print(f"build: {line}"), no_cache=no_cache)
    print(f"build: built {built.tag} ({built.platform}) {built.image_id} in {built.seconds:.1f}s")


@task(
    help={
        "registry": "HOST[:PORT]/NAME (default: the `registry` setting, else a local "
        "registry on 127.0.0.1 that push starts and keeps)",
        "run_dir": RUN_DIR_HELP,
    }
)
@reports("push")
def push(c: Context, registry: str = "", run_dir: str = "") -> None:
    """Push the kit image, print its digest, write the digest-pinned dist/spec.yaml."""
    from bandkit.kit import build_push as shortcuts

    configured = str(c.config.get(REGISTRY_SETTING, "") or "")
    where = resolve_run_dir(c, run_dir)
    shortcuts.push_here(registry, configured, where, note=lambda line: print(f"push: {line}"))
