"""`kit.boot-unit`: a systemd unit that runs `kit.resume --all` at boot.

A reboot takes everything host-side from the agents: the local platform, the credential
and egress proxies, the firewall chains, the sbx supervisors, and docker containers stop
(they have no restart policy: see `bandkit.runtimes.docker`). `kit.resume --all` brings
them back; this unit runs it once at boot, after the network and the Docker daemon. The
task only writes the file: installing it (`systemctl enable`) is the operator's step.

The unit names absolute paths only (the checkout, its virtualenv's python, the run
directory) and holds no key: a real deployment's user key comes from an environment file
the operator keeps (`--environment-file`, read by systemd, 0600 and root's), never from
the unit itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from bandkit.errors import BandkitError

UNIT_NAME = "band-kit-resume.service"
# Characters systemd would read as a specifier, a quote, an escape or a word break.
_PLAIN = re.compile(r"/[A-Za-z0-9._+/@:-]*")


class BootUnitError(BandkitError):
    """The unit cannot name a path as it is; the message says which and what to do."""


def _plain(path: Path, what: str) -> str:
    text = str(path)
    if not path.is_absolute() or _PLAIN.fullmatch(text) is None:
        raise BootUnitError(
            f"{what} {text!r} must be an absolute path of letters, digits and ._+-@:/ only "
            "(systemd reads spaces, quotes, % and $ in a unit); move it or use a link"
        )
    return text


def unit_text(
    *, repo: Path, run_dir: Path, python: Path, environment_file: Path | None = None
) -> str:
    """The unit's text: `python -m invoke kit.resume --all --run-dir RUN_DIR` from `repo`."""
    lines = [
        f"# {UNIT_NAME}: written by `uv run invoke kit.boot-unit`. At boot it brings back",
        "# every agent provisioned in the run directory below (`kit.resume --all`).",
        "[Unit]",
        "Description=Band kit: resume every provisioned agent (kit.resume --all)",
        "Wants=network-online.target",
        "After=network-online.target docker.service",
        "",
        "[Service]",
        "Type=oneshot",
        f"WorkingDirectory={_plain(repo, 'the checkout')}",
    ]
    if environment_file is not None:
        lines.append(f"EnvironmentFile={_plain(environment_file, 'the environment file')}")
    lines += [
        f"ExecStart={_plain(python, 'the python')} -m invoke kit.resume --all "
        f"--run-dir {_plain(run_dir, 'the run directory')}",
        "RemainAfterExit=yes",
        "TimeoutStartSec=900",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def install_hint(path: Path) -> str:
    return (
        f"to install it (as root): cp {path} /etc/systemd/system/{UNIT_NAME} && "
        f"systemctl daemon-reload && systemctl enable {UNIT_NAME}"
    )
