"""This host's own interface addresses, read from the kernel (rtnetlink, stdlib only).

`interfaces()` is every address assigned to any interface of this host (eth0, docker0 and
the other bridges, loopback, tunnels), each with its prefix, as `ipaddress` interfaces:
the egress proxy refuses those addresses and their on-link networks, since it connects
from the host and the host firewall (`hostguard`) never sees that traffic.

It asks the kernel directly (an `RTM_GETADDR` dump over a `NETLINK_ROUTE` socket, the
request `ip addr` makes), so it needs no tool, sees secondary addresses and both
families, and never reads anything a sandbox can write. `HostNetError` when the kernel
does not answer: the caller fails closed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

from bandkit.errors import BandkitError

__all__ = ["HostNetError", "Interface", "interfaces"]

Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface

_NLMSG = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_IFADDRMSG = struct.Struct("=BBBBI")  # ifaddrmsg: family, prefixlen, flags, scope, index
_RTATTR = struct.Struct("=HH")  # rtattr: len, type
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_RTM_NEWADDR, _RTM_GETADDR = 20, 22
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_TIMEOUT_S = 5.0


class HostNetError(BandkitError):
    """The kernel did not list this host's addresses; the message says why."""


def _align(n: int) -> int:
    return (n + 3) & ~3


def interfaces() -> list[Interface]:
    """Every address of every interface on this host, with its prefix length."""
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
            sock.settimeout(_TIMEOUT_S)
            sock.bind((0, 0))
            seq = int.from_bytes(os.urandom(4), "little") or 1
            body = _IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
            head = _NLMSG.pack(
                _NLMSG.size + len(body), _RTM_GETADDR, _NLM_F_REQUEST | _NLM_F_DUMP, seq, 0
            )
            sock.sendto(head + body, (0, 0))
            found: list[Interface] = []
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    raise HostNetError("the kernel closed the address dump early")
                if _parse(data, seq, found):
                    return found
    except (OSError, AttributeError) as exc:  # AttributeError: no AF_NETLINK (not Linux)
        raise HostNetError(f"cannot list this host's addresses over rtnetlink ({exc})") from None


def _parse(data: bytes, seq: int, found: list[Interface]) -> bool:
    """Append the addresses in one datagram of the dump; True once the dump is done."""
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, got_seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size or offset + length > len(data):
            raise HostNetError("a malformed rtnetlink message")
        if got_seq == seq:
            if kind == _NLMSG_DONE:
                return True
            if kind == _NLMSG_ERROR:
                (errno,) = struct.unpack_from("=i", data, offset + _NLMSG.size)
                if errno:
                    raise HostNetError(f"rtnetlink answered {os.strerror(-errno)}")
            elif kind == _RTM_NEWADDR:
                entry = _address(data[offset + _NLMSG.size : offset + length])
                if entry is not None:
                    found.append(entry)
        offset += _align(length)
    return False


def _address(message: bytes) -> Interface | None:
    family, prefix, _flags, _scope, _index = _IFADDRMSG.unpack_from(message)
    size = {socket.AF_INET: 4, socket.AF_INET6: 16}.get(family)
    if size is None:
        return None
    attrs: dict[int, bytes] = {}
    offset = _IFADDRMSG.size
    while offset + _RTATTR.size <= len(message):
        length, kind = _RTATTR.unpack_from(message, offset)
        if length < _RTATTR.size:
            break
        attrs[kind] = message[offset + _RTATTR.size : offset + length]
        offset += _align(length)
    # IFA_LOCAL is this end of a point-to-point link (IFA_ADDRESS is then the peer);
    # elsewhere the two are the same and only IFA_ADDRESS may be present.
    raw = attrs.get(_IFA_LOCAL) or attrs.get(_IFA_ADDRESS)
    if raw is None or len(raw) != size:
        return None
    return ipaddress.ip_interface((ipaddress.ip_address(raw), prefix))
