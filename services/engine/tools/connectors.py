"""Connectors: outside sources a run may query (a mailbox, a calendar...),
each named, and each offered to a run only when its conversation allows it.
A connector answers a query with a few items; the tool layer
(services.engine.tools.query_connector) turns them into text and records the read.

``TestMailConnector`` is the Gmail-like connector of tests and demos: a
fixed mailbox, searched by word, no network."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ConnectorItem:
    """One thing a connector found: an id of the connector's own, a title
    (a mail's subject), and its text."""

    item_id: str
    title: str
    text: str


class Connector(Protocol):
    # Identifies the connector in a conversation's allowed sources.
    name: str
    # Shown to the user (sources panel) and to the model.
    title: str

    async def search(self, user: str, query: str, limit: int) -> Sequence[ConnectorItem]: ...


_WORD = re.compile(r"\w+")

_MAILBOX = (
    ConnectorItem(
        "mail-1",
        "Quarterly review moved to Thursday",
        "From: dana@example.com. The quarterly review moves to Thursday 14:00, room Atlas.",
    ),
    ConnectorItem(
        "mail-2",
        "Invoice 4711 paid",
        "From: billing@example.com. Invoice 4711 (1,250 EUR) was paid on 3 March.",
    ),
    ConnectorItem(
        "mail-3",
        "Lunch on Friday?",
        "From: sam@example.com. Shall we have lunch on Friday at the Thai place?",
    ),
)


class TestMailConnector:
    """A mailbox of canned messages, the same for every user; a message
    matches when it contains every word of the query (case-insensitive).
    An empty query lists the newest messages."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self, name: str = "testmail", title: str = "Test mail", messages: Sequence[ConnectorItem] = _MAILBOX
    ) -> None:
        self.name, self.title = name, title
        self._messages = tuple(messages)

    async def search(self, user: str, query: str, limit: int) -> Sequence[ConnectorItem]:
        words = {w.casefold() for w in _WORD.findall(query)}
        found = [
            m for m in self._messages if words <= {w.casefold() for w in _WORD.findall(f"{m.title} {m.text}")}
        ]
        return found[:limit]
