from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes.helpers import Platform, emulator


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator"))) as p:
        yield p
