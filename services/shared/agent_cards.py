"""A remote A2A agent's card, read with the a2a-sdk's card resolver through
the outbound guard: threads reads it once to register the agent, the engine
again at each ask (where the agent is now, whether it streams).

Every request goes through :class:`~services.shared.outbound_urls.GuardedTransport`,
the card's own URL and the endpoints it declares included, and none follows
a redirect: an agent card cannot send Switchboard into its own network."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
from a2a.client import A2ACardResolver, A2AClientError
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import TransportProtocol

from services.shared.errors import InvalidArgument
from services.shared.outbound_tls import httpx_context
from services.shared.outbound_urls import GuardedTransport, UrlPolicy, check_url

# The bindings Switchboard speaks, in the order it prefers them (both over
# HTTP, so both through the guard; gRPC would bypass it).
BINDINGS: list[str] = [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON]
MAX_CARD_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000


class CardUnreadable(Exception):
    """The card could not be fetched or is not a usable agent card; the
    message says why, for the person who gave the URL."""


@dataclass(frozen=True)
class CardSummary:
    """What the registry keeps of a card."""

    name: str
    description: str
    streaming: bool


def guarded_client(policy: UrlPolicy, timeout: float) -> httpx.AsyncClient:
    """An HTTP client whose every request the policy checks, that follows
    no redirect, each request bounded by ``timeout``."""
    return httpx.AsyncClient(
        transport=GuardedTransport(policy, httpx_context(), field="card_url"),
        follow_redirects=False,
        timeout=timeout,
    )


def check_card_url(url: str, policy: UrlPolicy) -> None:
    """INVALID_ARGUMENT (field card_url) for a URL the policy refuses as written."""
    check_url(url, policy, field="card_url")


async def read_card(http: httpx.AsyncClient, url: str, policy: UrlPolicy) -> AgentCard:
    """The card at ``url`` (the card's own URL, not its host's), checked:
    a name, and an interface Switchboard can call at an address the policy
    allows. CardUnreadable otherwise."""
    try:
        # "/" reads the URL itself rather than <url>/.well-known/agent-card.json.
        card = await A2ACardResolver(http, url).get_agent_card(relative_card_path="/")
    except A2AClientError as exc:
        raise CardUnreadable(exc.message) from exc
    if not card.name.strip():
        raise CardUnreadable(f"the agent card at {url} has no name")
    usable = [i for i in card.supported_interfaces if i.protocol_binding in BINDINGS and i.url]
    if not usable:
        declared = ", ".join(sorted({i.protocol_binding or "?" for i in card.supported_interfaces})) or "none"
        raise CardUnreadable(
            f"the agent card at {url} declares no interface Switchboard can call "
            f"({' or '.join(BINDINGS)}; it declares: {declared})"
        )
    for interface in usable:
        try:
            check_url(interface.url, policy, field="the card's interface URL")
        except InvalidArgument as exc:
            raise CardUnreadable(exc.message) from exc
    return card


async def summarize_card(url: str, policy: UrlPolicy, timeout: float) -> CardSummary:
    """Fetches and checks the card for registration, within ``timeout`` in
    all; INVALID_ARGUMENT (field card_url) saying why when it cannot be used."""
    check_card_url(url, policy)
    try:
        async with asyncio.timeout(timeout), guarded_client(policy, timeout) as http:
            card = await read_card(http, url, policy)
    except TimeoutError:
        raise InvalidArgument(
            f"card_url: the agent card at {url} did not arrive within {timeout:g} s", field="card_url"
        ) from None
    except CardUnreadable as exc:
        raise InvalidArgument(f"card_url: {exc}", field="card_url") from None
    return CardSummary(
        name=" ".join(card.name.split())[:MAX_CARD_NAME_CHARS],
        description=card.description.strip()[:MAX_DESCRIPTION_CHARS],
        streaming=card.capabilities.streaming,
    )
