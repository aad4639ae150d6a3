"""SSRF guard for webhook URLs: check a URL once, then connect to exactly the address checked.

Refused: schemes other than http(s); credentials in the URL; control characters (C0 such as
NUL, DEL, C1) anywhere in it; host names no resolver can look up (IDNA: an empty or over-long
label, a prohibited character such as U+2028), a config error rather than a day of retries;
hosts written as non-canonical IPv4 (decimal ``2130706433``, hex ``0x7f000001``, octal
``0177.0.0.1``, short ``127.1``); and any host that resolves to a private, loopback,
link-local, site-local (``fec0::/10``), shared (CGNAT), reserved, unspecified, multicast or
IPv4-mapped address, or to an IPv6 form that embeds one (NAT64, 6to4, Teredo).
``allow_private`` opens private, loopback, shared and reserved addresses, but never link-local
or site-local ones (cloud metadata services live at 169.254.169.254 and fe80::/10): those, like
any other address, are reached only inside a network listed in the route's ``allow_networks``.
Multicast and unspecified addresses are never reached. Every resolved address must pass, and
the first is pinned: the POST goes to that IP with the original Host header and TLS SNI, so a
second DNS answer cannot redirect it.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from dataclasses import dataclass
from typing import Callable, Sequence
from urllib.parse import urlsplit

from driftwarden.core.errors import DeliveryError

Resolver = Callable[[str, int], Sequence[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated (RFC 3879), still routed inside sites
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NEVER = ("multicast", "unspecified")
_NOT_BY_ALLOW_PRIVATE = ("link-local", "site-local")


class UnsafeURLError(DeliveryError):
    """A webhook URL is refused by the SSRF guard; the message says why."""


class UnresolvableHostError(UnsafeURLError):
    """A webhook host does not resolve right now (may be transient: the delivery is retried)."""


@dataclass(frozen=True)
class PinnedTarget:
    """A checked webhook URL and the address it must be reached at."""

    url: str
    scheme: str
    host: str
    port: int
    ip: str
    path: str

    @property
    def pinned_url(self) -> str:
        """The URL with the host replaced by the checked IP address."""
        literal = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{self.scheme}://{literal}:{self.port}{self.path}"

    @property
    def host_header(self) -> str:
        """The Host header the receiver expects (port only when not the scheme's default)."""
        literal = f"[{self.host}]" if ":" in self.host else self.host
        return literal if _DEFAULT_PORTS[self.scheme] == self.port else f"{literal}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` to every address the system resolver returns (TCP)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise UnresolvableHostError(f"cannot resolve host {host!r}: {exc}") from exc
    return list(dict.fromkeys(info[4][0] for info in infos))


def check_url(url: str, allow_private: bool = False, resolver: Resolver = system_resolver,
              allow_networks: Sequence[str] = ()) -> PinnedTarget:
    """Check ``url`` against the SSRF rules and return it pinned to a vetted address."""
    scheme, host, port, path = _split(url)
    addresses = [_parse_ip(a) for a in resolver(host, port)]
    if not addresses:
        raise UnsafeURLError(f"host {host!r} resolves to no address")
    networks = [check_network(n) for n in allow_networks]
    for address in addresses:
        reason = refusal(address, allow_private, networks)
        if reason:
            raise UnsafeURLError(f"host {host!r} resolves to {address}, a {reason} address")
    return PinnedTarget(url=url, scheme=scheme, host=host, port=port, ip=str(addresses[0]), path=path)


def refusal(address: IPAddress, allow_private: bool = False,
            networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = ()) -> str | None:
    """Return why a route with these allowances must not reach ``address`` (None when it may)."""
    reason = forbidden_reason(address)
    if reason is None or reason in _NEVER:
        return reason
    if any(address.version == n.version and address in n for n in networks):
        return None
    if allow_private and not any(r in reason for r in _NOT_BY_ALLOW_PRIVATE):
        return None
    return reason


def check_syntax(url: str) -> None:
    """Raise UnsafeURLError when ``url`` is refused before any resolution (used at config load)."""
    _split(url)


def check_network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """Parse one ``allow_networks`` entry (CIDR); raise ValueError naming it when malformed."""
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ValueError(f"allow_networks entry {text!r} is not a CIDR network: {exc}") from None


def forbidden_reason(address: IPAddress) -> str | None:
    """Return why ``address`` must not be reached from a webhook (None when it is public)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            inner = forbidden_reason(address.ipv4_mapped)
            return f"IPv4-mapped {inner}" if inner else "IPv4-mapped"
        embedded = _embedded_ipv4(address)
        if embedded is not None and forbidden_reason(embedded):
            return f"IPv6-embedded {forbidden_reason(embedded)}"
    if isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL:
        return "site-local"
    for attr in ("unspecified", "multicast", "loopback", "link_local", "private", "reserved"):
        if getattr(address, f"is_{attr}"):
            return attr.replace("_", "-")
    return None if address.is_global else "non-global"


def _split(url: str) -> tuple[str, str, int, str]:
    """Split and syntax-check a URL; return (scheme, host, port, path+query)."""
    bad = next((c for c in url if unicodedata.category(c) == "Cc"), None)  # C0, DEL and C1
    if bad is not None:
        raise UnsafeURLError(f"control character {bad!r} in the URL refused")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UnsafeURLError(f"malformed URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UnsafeURLError(f"scheme {scheme or '(none)'!r} refused: only http and https")
    if "@" in parts.netloc or parts.username is not None:
        raise UnsafeURLError("credentials in the URL are refused: use secret_env for signing")
    host = (parts.hostname or "").rstrip(".")
    if not host or any(c in host for c in "%\\ \t\r\n"):
        raise UnsafeURLError(f"host {parts.hostname!r} refused")
    if not _is_ip_literal(host):
        _refuse_legacy_ipv4(host)
        _refuse_unresolvable_name(host)
    path = parts.path or "/"
    return scheme, host, port or _DEFAULT_PORTS[scheme], path + (f"?{parts.query}" if parts.query else "")


def _is_ip_literal(host: str) -> bool:
    """True for an IPv4 address in four decimal octets or an IPv6 address."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _refuse_legacy_ipv4(host: str) -> None:
    """Refuse IPv4 written in any form but four decimal octets (decimal, hex, octal, short): a host
    name that is not an IP literal (:func:`_is_ip_literal`)."""
    try:
        socket.inet_aton(host)
    except OSError:
        if host.replace(".", "").isdigit() or host.lower().startswith("0x"):
            raise UnsafeURLError(f"numeric host {host!r} refused") from None
        return
    raise UnsafeURLError(f"non-canonical IPv4 host {host!r} refused")


def _refuse_unresolvable_name(host: str) -> None:
    """Refuse a host name (not an IP literal) the system resolver would refuse at every attempt (it
    IDNA-encodes it first)."""
    try:
        host.encode("idna")
    except UnicodeError as exc:
        raise UnsafeURLError(f"host name refused: {exc}") from None


def _parse_ip(text: str) -> IPAddress:
    """Parse a resolved address (dropping an IPv6 zone id)."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError as exc:
        raise UnsafeURLError(f"resolver returned a non-address {text!r}") from exc


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """Return the IPv4 address a NAT64, 6to4 or Teredo IPv6 address carries, if any."""
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None
