"""The webhook SSRF guard: which URLs a run may name, and which resolved
addresses a delivery may reach, under each operator setting."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from services.shared.errors import InvalidArgument
from services.shared.outbound_tls import httpx_context
from services.shared.outbound_urls import (
    GuardedTransport,
    RefusedAddress,
    UrlPolicy,
    address_refusal,
    check_url,
    resolve_allowed,
)

STRICT = UrlPolicy()
DEVELOPMENT = UrlPolicy(allow_loopback=True)
PRIVATE = UrlPolicy(allow_private=True)


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "https://hooks.example.com:8443/a?b=c", "https://93.184.216.34/hook"],
)
def test_public_https_urls_are_accepted(url: str) -> None:
    assert check_url(url, STRICT).scheme == "https"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("", "not a valid URL|must be an https URL"),
        ("example.com/hook", "https"),
        ("ftp://example.com/hook", "https"),
        ("javascript:alert(1)", "https"),
        ("http://example.com/hook", "must be https"),
        ("https:///hook", "no host"),
        ("https://user:pw@example.com/", "credentials"),
        ("https://example.com/#frag", "fragment"),
        ("https://example.com:70000/", "not a valid URL"),
        ("https://exa mple.com/", "spaces"),
        (" https://example.com/", "spaces"),
        ("https://example.com/\n", "control"),
        ("https://" + "a" * 2048, "exceeds"),
        ("https://127.0.0.1/hook", "loopback"),
        ("https://localhost/hook", "loopback"),
        ("https://api.localhost/hook", "loopback"),
        ("https://[::1]/hook", "loopback"),
        ("https://10.1.2.3/hook", "private"),
        ("https://172.16.0.1/hook", "private"),
        ("https://192.168.0.10/hook", "private"),
        ("https://100.64.0.1/hook", "private"),  # shared address space (carrier NAT)
        ("https://169.254.169.254/latest/meta-data", "private"),  # link-local: cloud metadata
        ("https://[fe80::1]/hook", "private"),
        ("https://[fd12::1]/hook", "private"),
        ("https://[::ffff:10.0.0.1]/hook", "private"),  # IPv4-mapped
        ("https://192.0.2.1/hook", "private"),  # documentation range
        ("https://" + "x" * 70 + ".example.com/", "not valid"),  # a DNS label is at most 63
        ("https://0.0.0.0/hook", "unicast"),
        ("https://224.0.0.1/hook", "unicast"),
    ],
)
def test_refused_urls_say_why(url: str, why: str) -> None:
    with pytest.raises(InvalidArgument, match=why) as refused:
        check_url(url, STRICT)
    assert refused.value.metadata.get("field") == "webhook_url"


def test_development_allows_loopback_and_http_to_it_only() -> None:
    assert check_url("http://127.0.0.1:8080/hook", DEVELOPMENT).port == 8080
    assert check_url("http://localhost/hook", DEVELOPMENT).hostname == "localhost"
    assert check_url("https://[::1]/hook", DEVELOPMENT).hostname == "::1"
    with pytest.raises(InvalidArgument, match="must be https"):
        check_url("http://example.com/hook", DEVELOPMENT)
    with pytest.raises(InvalidArgument, match="private"):
        check_url("https://10.0.0.1/hook", DEVELOPMENT)


def test_the_operator_may_allow_private_addresses_but_not_http_to_them() -> None:
    assert check_url("https://10.0.0.1/hook", PRIVATE).hostname == "10.0.0.1"
    assert check_url("https://169.254.1.1/hook", PRIVATE).hostname == "169.254.1.1"
    with pytest.raises(InvalidArgument, match="must be https"):
        check_url("http://10.0.0.1/hook", PRIVATE)
    assert address_refusal(ipaddress.ip_address("224.0.0.1"), PRIVATE) is not None


def _resolving_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    """Name resolution answers ``addresses`` (a DNS record the test controls)."""

    async def getaddrinfo(self: Any, host: str, port: int, **_: Any) -> list[Any]:
        family = socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port)) for address in addresses]

    monkeypatch.setattr("asyncio.base_events.BaseEventLoop.getaddrinfo", getaddrinfo)


async def test_a_name_resolving_to_a_public_address_is_reached_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch, "93.184.216.34")
    address = await resolve_allowed(urlsplit("https://hooks.example.com/h"), STRICT)
    assert str(address) == "93.184.216.34"


@pytest.mark.parametrize("answers", [("10.0.0.5",), ("93.184.216.34", "127.0.0.1"), ("169.254.169.254",)])
async def test_a_name_resolving_inside_is_refused_at_delivery(
    monkeypatch: pytest.MonkeyPatch, answers: tuple[str, ...]
) -> None:
    # The URL passed the check when the run started; its name now points
    # inside (DNS rebinding): the delivery refuses it.
    parts = check_url("https://rebind.example.com/h", STRICT)
    _resolving_to(monkeypatch, *answers)
    with pytest.raises(RefusedAddress):
        await resolve_allowed(parts, STRICT)


async def test_http_at_delivery_needs_loopback_allowed_and_a_loopback_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert str(await resolve_allowed(urlsplit("http://127.0.0.1:9/h"), DEVELOPMENT)) == "127.0.0.1"
    with pytest.raises(RefusedAddress):
        await resolve_allowed(urlsplit("http://127.0.0.1:9/h"), STRICT)
    _resolving_to(monkeypatch, "93.184.216.34")
    with pytest.raises(RefusedAddress, match="loopback"):
        await resolve_allowed(urlsplit("http://public.example.com/h"), DEVELOPMENT)


async def test_the_guarded_transport_refuses_every_request_the_policy_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What remote A2A agents are called through: each request (a card's
    endpoint, a redirect's target) is checked when it is sent, its name
    resolved then, and refused as a connection error that says why."""
    _resolving_to(monkeypatch, "10.0.0.5")
    async with httpx.AsyncClient(transport=GuardedTransport(STRICT, httpx_context(), "card_url")) as client:
        for url, why in [
            ("https://rebind.example.com/a2a", "private"),
            ("http://127.0.0.1:9/a2a", "loopback"),
            ("https://169.254.169.254/latest", "private or special-purpose"),
        ]:
            with pytest.raises(httpx.ConnectError, match=f"refused: .*{why}"):
                await client.get(url)
