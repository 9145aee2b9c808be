"""The page tokens and sizes every List RPC uses: bounds, opaque tokens read
back by the listing's own reader, a next token only when a row is left."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.shared.errors import InvalidArgument
from services.shared.pagination import (
    as_count,
    as_instant,
    as_text,
    by_offset,
    encode_token,
    offset_token,
    page_of,
    page_request,
    page_size,
    same,
)


def test_page_size_bounds() -> None:
    assert page_size(0) == 50 and page_size(7) == 7 and page_size(10_000) == 500
    assert page_size(0, default=20, maximum=100) == 20 and page_size(101, 20, 100) == 100
    with pytest.raises(InvalidArgument) as error:
        page_size(-1)
    assert error.value.metadata == {"field": "page_size"}


def test_a_token_round_trips_through_the_listings_reader() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    rows = [(when, "a"), (when, "b"), (when, "c")]
    page, token = page_of(rows, 2, lambda last: {"t": last[0].isoformat(), "id": last[1]})
    assert page == rows[:2] and token
    size, position = page_request(2, token, lambda cursor: (as_instant(cursor["t"]), as_text(cursor["id"])))
    assert (size, position) == (2, (when, "b"))
    assert page_of(rows, 3, lambda last: {"id": last[1]}) == (rows, "")
    assert page_request(0, "", as_text) == (50, None)


@pytest.mark.parametrize(
    "token",
    [
        "not base64 json!",
        encode_token({"other": 1}),
        encode_token({"id": "3"}),
        encode_token({"id": True}),
        encode_token({"id": -1}),
        "WzEsMl0=",  # a JSON list, not an object
    ],
)
def test_a_token_the_listing_did_not_issue_is_invalid_argument(token: str) -> None:
    with pytest.raises(InvalidArgument) as error:
        page_request(10, token, lambda cursor: as_count(cursor["id"]))
    assert error.value.metadata == {"field": "page_token"}


def test_a_token_of_another_filter_is_refused() -> None:
    def read(cursor: dict[str, object]) -> str:
        same(cursor["v"], ["project-a"])
        return as_text(cursor["a"])

    assert page_request(5, encode_token({"v": ["project-a"], "a": "x"}), read) == (5, "x")
    with pytest.raises(InvalidArgument):
        page_request(5, encode_token({"v": ["project-b"], "a": "x"}), read)


def test_offset_paging() -> None:
    assert offset_token(3, 3) == ""
    size, start = page_request(2, offset_token(2, 5), by_offset)
    assert (size, start) == (2, 2)
