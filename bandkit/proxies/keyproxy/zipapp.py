"""The credential proxy as one file any Python 3.11+ runs: a zipapp of `keyproxy`, the few
modules it imports and `h11`. The swarm runtime ships it to each proxy service as a swarm
config (the kit image has a Python but not this package); the sidecar image
(`bandkit.image.proxy`) carries it with the sidecar's entry point.

`build(entry)` makes it reproducibly (sorted entries, fixed timestamps): the same code is
the same bytes on every run. `entry` picks `__main__`: `server` (`PORTS_FILE HOST <
config`) or `sidecar` (arguments and mounted files, `keyproxy.sidecar`).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Literal

import h11

import bandkit

PACKAGE = Path(bandkit.__file__).resolve().parent
# What `python -m bandkit.proxies.keyproxy` imports from this package, and nothing else.
MODULES = (
    "__init__.py",
    "errors.py",
    "fsio.py",
    "proxies/__init__.py",
    "proxies/wire.py",
    "proxies/keyproxy/__init__.py",
    "proxies/keyproxy/config.py",
    "proxies/keyproxy/heads.py",
    "proxies/keyproxy/server.py",
    "proxies/keyproxy/session.py",
    "proxies/keyproxy/sidecar.py",
)
Entry = Literal["server", "sidecar"]
MAIN = (
    "import sys\nfrom bandkit.proxies.keyproxy.{entry} import main\nsys.exit(main(sys.argv[1:]))\n"
)
EPOCH = (1980, 1, 1, 0, 0, 0)
MAX_CONFIG_BYTES = 500 * 1024  # a swarm config's limit


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def build(entry: Entry = "server") -> bytes:
    """The zipapp's bytes (run as `python -P keyproxy.pyz ARGS`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _add(archive, "__main__.py", MAIN.format(entry=entry).encode())
        for module in MODULES:
            _add(archive, f"bandkit/{module}", (PACKAGE / module).read_bytes())
        h11_dir = Path(h11.__file__).resolve().parent
        for path in sorted(h11_dir.glob("*.py")):
            _add(archive, f"h11/{path.name}", path.read_bytes())
    data = buffer.getvalue()
    if len(data) > MAX_CONFIG_BYTES:
        raise RuntimeError(f"the proxy zipapp is {len(data)} bytes, over a swarm config's limit")
    return data
