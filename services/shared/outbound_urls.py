"""Which user-given URLs a service may call, and which addresses a call may
reach: a guard against making a service call into its own network (SSRF).
Webhooks (the engine's deliveries) and remote A2A agents (their cards and
their asks) both go through it.

A URL is https, or http on a loopback host where the operator allows
loopback for development. Its host must not be, or resolve to, a private,
loopback, link-local or otherwise special address unless the operator allows
it. The check runs twice: when the URL is given (as written) and at each
call on the addresses the name resolves to then, and the call connects to
the address checked (not to a second resolution that could answer
differently: DNS rebinding); :class:`GuardedTransport` does both for every
request of an ``httpx`` client."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import httpx

from services.shared.errors import InvalidArgument

MAX_URL_CHARS = 2048
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedAddress(Exception):
    """The URL's host resolves to an address the policy refuses."""


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


def check_url(url: str, policy: UrlPolicy, field: str = "webhook_url") -> SplitResult:
    """The parsed URL; INVALID_ARGUMENT (naming ``field``) when it is not one
    the policy lets a service call."""

    def refuse(why: str) -> InvalidArgument:
        return InvalidArgument(f"{field} {why}", field=field)

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
        raise refuse(f"names a loopback host ({host}), which this service does not call")
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


def pinned_url(parts: SplitResult, address: IpAddress) -> str:
    """``parts`` with its host replaced by ``address``, the port kept."""
    target = f"[{address}]" if address.version == 6 else str(address)
    return parts._replace(netloc=f"{target}:{parts.port}" if parts.port else target).geturl()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that checks every request's URL against the
    policy, resolves its host once, refuses it when any address is refused,
    and connects to the address it checked under the URL's own name (Host
    header, TLS server name and certificate check). A client that follows a
    redirect sends a new request through here, checked the same way. A
    refusal is an ``httpx.ConnectError`` whose message says why, so a
    library over ``httpx`` reports it as the network error it handles."""

    def __init__(self, policy: UrlPolicy, verify: ssl.SSLContext, field: str = "url") -> None:
        self._policy = policy
        self._field = field
        self._inner = httpx.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            parts = check_url(str(request.url), self._policy, self._field)
            address = await resolve_allowed(parts, self._policy)
        except InvalidArgument as exc:
            raise httpx.ConnectError(f"refused: {exc.message}", request=request) from exc
        except RefusedAddress as exc:
            raise httpx.ConnectError(f"refused: {exc}", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{request.url.host} does not resolve: {exc}", request=request) from exc
        request.headers["host"] = parts.netloc
        request.url = httpx.URL(pinned_url(parts, address))
        if parts.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": parts.hostname or ""}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
