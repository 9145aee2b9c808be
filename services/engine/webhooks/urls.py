"""Which webhook URLs a run may name, and which addresses a delivery may
reach: a guard against making the engine call into its own network (SSRF).

A URL is https, or http on a loopback host where the operator allows
loopback for development. Its host must not be, or resolve to, a private,
loopback, link-local or otherwise special address unless the operator allows
it. The check runs twice: when the run is started (the URL as written) and
at each delivery on the addresses the name resolves to then, and the
delivery connects to the address checked (not to a second resolution that
could answer differently: DNS rebinding)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from services.shared.errors import InvalidArgument

MAX_URL_CHARS = 2048
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedAddress(Exception):
    """The webhook's host resolves to an address the policy refuses."""


@dataclass(frozen=True)
class UrlPolicy:
    # Loopback addresses (and http to them): for development only.
    allow_loopback: bool = False
    # Every non-public unicast address (private networks, link-local,
    # shared, reserved...): for an operator whose receivers live there.
    allow_private: bool = False


def _is_loopback_name(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")


def _literal(host: str) -> IpAddress | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:10.0.0.1 is 10.0.0.1
    return address


def address_refusal(address: IpAddress, policy: UrlPolicy) -> str | None:
    """Why ``address`` may not be called, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_multicast or address.is_unspecified:
        return f"{address} is not a unicast address"
    if address.is_loopback:
        if policy.allow_loopback or policy.allow_private:
            return None
        return f"{address} is a loopback address"
    if not address.is_global and not policy.allow_private:
        return f"{address} is a private or special-purpose address"
    return None


def check_url(url: str, policy: UrlPolicy) -> SplitResult:
    """The parsed URL; INVALID_ARGUMENT (field webhook_url) when it is not one
    a run may name."""

    def refuse(why: str) -> InvalidArgument:
        return InvalidArgument(f"webhook_url {why}", field="webhook_url")

    if len(url) > MAX_URL_CHARS:
        raise refuse(f"exceeds {MAX_URL_CHARS} characters")
    if url != url.strip() or any(ord(c) < 33 for c in url):
        raise refuse("must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of range or not a number
    except ValueError as exc:
        raise refuse(f"is not a valid URL: {exc}") from exc
    if parts.scheme not in ("https", "http"):
        raise refuse("must be an https URL")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise refuse("has no host")
    if parts.username is not None or parts.password is not None:
        raise refuse("must not carry credentials")
    if parts.fragment:
        raise refuse("must not have a fragment")
    try:
        host.encode("idna")
    except UnicodeError as exc:
        raise refuse(f"has a host name that is not valid: {exc}") from exc
    literal = _literal(host)
    loopback = _is_loopback_name(host) or (literal is not None and literal.is_loopback)
    if loopback and not (policy.allow_loopback or policy.allow_private):
        raise refuse(f"names a loopback host ({host}), which this engine does not call")
    if literal is not None and (why := address_refusal(literal, policy)):
        raise refuse(f"names a refused address: {why}")
    if parts.scheme == "http" and not (loopback and policy.allow_loopback):
        raise refuse("must be https (http only to loopback, where allowed for development)")
    return parts


async def resolve_allowed(parts: SplitResult, policy: UrlPolicy) -> IpAddress:
    """The address to connect to: the URL's host resolved now, refused when
    *any* address it resolves to is refused (a name that also points inside
    is refused rather than tried on its public address only)."""
    host = (parts.hostname or "").rstrip(".")
    if _is_loopback_name(host) and not (policy.allow_loopback or policy.allow_private):
        raise RefusedAddress(f"{host} is a loopback host")
    if parts.scheme == "http" and not policy.allow_loopback:
        raise RefusedAddress("http is allowed only to loopback in development")
    literal = _literal(host)
    if literal is not None:
        addresses: list[IpAddress] = [literal]
    else:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = []
        for info in infos:
            found = _literal(str(info[4][0]).split("%")[0])
            if found is not None and found not in addresses:
                addresses.append(found)
    if not addresses:
        raise RefusedAddress(f"{host} resolves to no address")
    for address in addresses:
        if why := address_refusal(address, policy):
            raise RefusedAddress(why)
        if parts.scheme == "http" and not address.is_loopback:
            raise RefusedAddress(f"http to {address}: http is allowed only to loopback")
    return addresses[0]
