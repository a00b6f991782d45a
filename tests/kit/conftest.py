from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from bandkit.kit.provision import ProvisionRequest
from bandkit.runtimes.base import Runtime
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sbx import SbxRuntime
from tests.fakes.simharness import Sim, simulator
from tests.runtimes.helpers import Platform, emulator, scratch_dir

RuntimeFactory = Callable[[Path], Runtime]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator"))) as p:
        yield p


@pytest.fixture
def scratch() -> Iterator[Path]:
    import shutil

    path = scratch_dir("prov-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def _sim(version: str, mp: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator(version) as sim:
        sim("policy", "init", "balanced", check=True)
        for key, value in sim.env.items():
            mp.setenv(key, value)
        yield sim


@pytest.fixture(params=["local", "sbx-0.35", "sbx-0.47"])
def backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Sim | None]]:
    """A runtime kind and, for sbx, the simulator it drives."""
    kind = str(request.param)
    if kind == "local":
        yield kind, None
        return
    with _sim(kind.split("-")[1] + ".0", monkeypatch) as sim:
        yield kind, sim


def make_runtime(kind: str, run_dir: Path, manifest: object = None) -> Runtime:
    if kind == "local":
        return LocalRuntime(run_dir / "local", manifest=manifest)  # type: ignore[arg-type]
    return SbxRuntime(manifest=manifest)  # type: ignore[arg-type]


def sim_context(version: str, mp: pytest.MonkeyPatch) -> AbstractContextManager[Sim]:
    return _sim(version, mp)


DESCRIPTION = "an echo agent provisioned by the tests"


def request_for(platform: Platform, ws: Path, name: str, **extra: object) -> ProvisionRequest:
    """A provision request against the test platform; `create` is off unless given."""
    fields: dict[str, object] = {"create": False, **extra}
    return ProvisionRequest(
        name=name,
        description=DESCRIPTION,
        workspace=ws,
        rest_url=platform.rest_url,
        **fields,  # type: ignore[arg-type]
    )
