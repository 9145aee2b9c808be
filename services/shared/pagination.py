"""Page tokens and page sizes, the same for every List RPC.

Tokens are opaque: clients pass them back unchanged and never parse them.
Inside, a token is a small JSON object naming the position a page starts
after (keyset paging: the sort key of the last row sent), so a page costs
one indexed query however deep it is, and rows written meanwhile are neither
skipped nor repeated.

A listing reads a request with ``page_request`` (the size within bounds, and
the position decoded by the listing's own ``read``), fetches ``size + 1``
rows after that position, and answers with ``page_of`` (the page, and the
token of the next one when there is a row more)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from services.shared.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

T = TypeVar("T")
K = TypeVar("K")

Cursor = dict[str, Any]


def page_size(requested: int, default: int = DEFAULT_PAGE_SIZE, maximum: int = MAX_PAGE_SIZE) -> int:
    """The size of a page: ``default`` for 0, at most ``maximum``; negative is refused."""
    if requested < 0:
        raise InvalidArgument("page_size must not be negative", field="page_size")
    return min(requested or default, maximum)


def encode_token(cursor: Cursor) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode()).decode()


def bad_token() -> InvalidArgument:
    return InvalidArgument(
        "page_token is not a token this service issued for this listing", field="page_token"
    )


def decode_token(token: str) -> Cursor:
    """The cursor a token holds; {} for no token."""
    if not token:
        return {}
    try:
        cursor = json.loads(base64.urlsafe_b64decode(token.encode()))
    except ValueError as exc:
        raise bad_token() from exc
    if not isinstance(cursor, dict):
        raise bad_token()
    return cursor


def page_request(
    requested_size: int,
    token: str,
    read: Callable[[Cursor], K],
    default: int = DEFAULT_PAGE_SIZE,
    maximum: int = MAX_PAGE_SIZE,
) -> tuple[int, K | None]:
    """(page size, position the page starts after): the position is
    ``read(cursor)``, None for the first page. A token that ``read`` cannot
    make sense of (KeyError, TypeError, ValueError) is INVALID_ARGUMENT."""
    size = page_size(requested_size, default, maximum)
    cursor = decode_token(token)
    if not cursor:
        return size, None
    try:
        return size, read(cursor)
    except (KeyError, TypeError, ValueError) as exc:
        raise bad_token() from exc


def page_of(rows: Sequence[T], size: int, position: Callable[[T], Cursor]) -> tuple[list[T], str]:
    """The page out of ``rows`` fetched with a limit of ``size + 1``, and the
    token of the next page (the cursor ``position`` gives its last row), or
    "" when this page is the last."""
    items = list(rows[:size])
    return items, encode_token(position(items[-1])) if len(rows) > size else ""


def offset_token(end: int, total: int) -> str:
    """The next page's token of a listing paged by offset (a short list held
    in memory, where a position is its index): "" at the end."""
    return encode_token({"offset": end}) if end < total else ""


# Readers of cursor fields, for ``read``: each raises ValueError (or TypeError)
# for a value of the wrong type, which ``page_request`` turns into a bad token.


def as_text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("not text")
    return value


def as_count(value: object) -> int:
    """A whole number ≥ 0 (booleans are not numbers here)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("not a count")
    return value


def as_instant(value: object) -> datetime:
    return datetime.fromisoformat(as_text(value))


def same(value: object, expected: object) -> None:
    """A token issued for another listing (another filter) is refused."""
    if value != expected:
        raise ValueError("a token of another listing")


def by_offset(cursor: Cursor) -> int:
    """``read`` of a listing paged by offset."""
    return as_count(cursor["offset"])
