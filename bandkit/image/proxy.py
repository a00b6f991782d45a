"""The credential proxy's sidecar image, `band-credential-proxy`, for fleets rendered for
Kubernetes (`fleet.render --proxy-image`, default `band-credential-proxy:local`).

`build()` makes it from the kit image and one file, the proxy as a zipapp with the
sidecar's entry point (`bandkit.proxies.keyproxy.sidecar`), through
`docker/credential-proxy/Dockerfile`: it runs as uid 1000 and needs no capability and no
writable root. It is tagged `band-credential-proxy:<digest>` (over the kit image's id and
the zipapp's bytes, so a second build with neither changed builds nothing) and
`band-credential-proxy:local`. Before it reports success the image is proved: it runs
with no network, a read-only root and every capability dropped, and answers `--help`.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bandkit.dockercli import (
    ImageError,
    docker,
    image_exists,
    image_id,
    image_size,
    output_tail,
    require_image,
)
from bandkit.image.built import BuiltImage
from bandkit.image.facts import LOCAL_TAG, REPO_ROOT
from bandkit.proxies.keyproxy import zipapp

REPOSITORY = "band-credential-proxy"
LOCAL = f"{REPOSITORY}:local"
DOCKERFILE = REPO_ROOT / "docker" / "credential-proxy" / "Dockerfile"
APP = "credential-proxy.pyz"
BUILD_TIMEOUT_S = 600.0
USAGE = "usage: credential-proxy"  # the first words of its --help


def build(*, base: str = LOCAL_TAG, progress: Callable[[str], None] = print) -> BuiltImage:
    """The sidecar image on `base` (the kit image): found, or built and proved."""
    began = time.monotonic()
    require_image(base)
    app = zipapp.build("sidecar")
    digest = hashlib.sha256(f"{image_id(base)}\n".encode() + app).hexdigest()[:20]
    tag = f"{REPOSITORY}:{digest}"
    built = not image_exists(tag)
    if built:
        progress(f"build-proxy: building {tag} on {base} ...")
        with tempfile.TemporaryDirectory(prefix="bandkit-proxy-image-") as context:
            (Path(context) / APP).write_bytes(app)
            argv = ["build", "--file", str(DOCKERFILE), "--tag", tag]
            argv += ["--build-arg", f"KIT_IMAGE={base}", "--force-rm", context]
            done = docker(argv, BUILD_TIMEOUT_S, env={"DOCKER_BUILDKIT": "0"}, check=False)
            if done.returncode != 0:
                tail = output_tail(done)
                raise ImageError(f"the sidecar image's build failed:\n{tail}")
        _prove(tag)
    docker(["tag", tag, LOCAL], 30)
    return BuiltImage(tag, built, time.monotonic() - began, image_size(tag))


def _prove(tag: str) -> None:
    hardened = ["--network", "none", "--read-only", "--cap-drop", "ALL"]
    ran = docker(["run", "--rm", *hardened, tag, "--help"], 60, check=False)
    if ran.returncode != 0 or not ran.stdout.startswith(USAGE):
        docker(["image", "rm", tag], 60, check=False)
        tail = output_tail(ran)
        raise ImageError(f"{tag} was built but does not run (removed):\n{tail}")
