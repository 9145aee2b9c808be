"""Keyset pagination over a thread's sequence numbers, forwards and backwards.

A page token encodes a direction ("n": the page after, "p": the page before,
both in the view's order), a position (a sequence number, excluded) and a
fingerprint of the view that issued it, so a token is never silently applied
to another view. Pure logic over a fetch function: no SQL, no gRPC.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from services.shared.pagination import bad_token, decode_token, encode_token


class Sequenced(Protocol):
    @property
    def sequence(self) -> int: ...


T = TypeVar("T", bound=Sequenced)

# fetch(position, ascending, limit): up to ``limit`` items strictly after
# ``position`` in sequence order (ascending), or strictly before it (descending,
# newest first); ``position`` None means from the start of that order.
Fetch = Callable[[int | None, bool, int], Awaitable[Sequence[T]]]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_token: str
    previous_token: str


def view_fingerprint(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def _decode(token: str, fingerprint: str) -> tuple[bool, int] | None:
    """(forward, position), or None for the first page."""
    cursor = decode_token(token)
    if not cursor:
        return None
    if set(cursor) == {"seq"}:  # tokens issued before backward paging: "after seq"
        cursor = {"d": "n", "s": cursor["seq"], "v": fingerprint}
    direction, position = cursor.get("d"), cursor.get("s")
    if direction not in ("n", "p") or not isinstance(position, int) or isinstance(position, bool):
        raise bad_token()
    if cursor.get("v") != fingerprint:
        raise bad_token()
    return direction == "n", position


def _encode(forward: bool, position: int, fingerprint: str) -> str:
    return encode_token({"d": "n" if forward else "p", "s": position, "v": fingerprint})


def start_token(ascending: bool, sequence: int, fingerprint: str) -> str:
    """The token of a page that starts at ``sequence`` (included) in the view's order."""
    return _encode(True, sequence - 1 if ascending else sequence + 1, fingerprint)


async def read_page(fetch: Fetch[T], descending: bool, size: int, token: str, fingerprint: str) -> Page[T]:
    """One page in the view's order (ascending, or newest first when
    ``descending``), with the tokens of the page after and the page before."""
    cursor = _decode(token, fingerprint)
    view_ascending = not descending
    if cursor is None or cursor[0]:
        position = None if cursor is None else cursor[1]
        rows = list(await fetch(position, view_ascending, size + 1))
        more_after, items = len(rows) > size, rows[:size]
        # A forward token points just past an entry of this view: there is a page before.
        more_before = cursor is not None
    else:
        rows = list(await fetch(cursor[1], not view_ascending, size + 1))
        more_before, items = len(rows) > size, rows[:size][::-1]
        more_after = True  # we came back from the page after
    if not items:
        return Page(items, "", "")
    return Page(
        items,
        _encode(True, items[-1].sequence, fingerprint) if more_after else "",
        _encode(False, items[0].sequence, fingerprint) if more_before else "",
    )
