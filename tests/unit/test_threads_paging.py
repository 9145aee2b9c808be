"""Paging a view forwards and backwards never skips or repeats an entry
(seeded random property test over an in-memory thread), and tokens are
bound to the view that issued them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from services.shared.errors import InvalidArgument
from services.shared.pagination import encode_token
from services.threads.paging import Fetch, Page, read_page


@dataclass(frozen=True)
class Item:
    sequence: int


def fetcher(sequences: list[int]) -> Fetch[Item]:
    """The repository's contract over a sorted list: strictly after
    ``position`` ascending, or strictly before it newest first."""

    async def fetch(position: int | None, ascending: bool, limit: int) -> Sequence[Item]:
        if ascending:
            rows = [s for s in sequences if position is None or s > position]
        else:
            rows = [s for s in reversed(sequences) if position is None or s < position]
        return [Item(s) for s in rows[:limit]]

    return fetch


def seqs(page: Page[Item]) -> list[int]:
    return [item.sequence for item in page.items]


@pytest.mark.parametrize("seed", range(40))
async def test_paging_both_ways_never_skips_or_repeats(seed: int) -> None:
    rng = random.Random(seed)
    # A thread of up to 120 entries; the view keeps a random subset (a filter).
    density = rng.choice([0.1, 0.5, 1.0])
    view = [s for s in range(1, rng.randint(0, 120) + 1) if rng.random() < density]
    descending = rng.random() < 0.5
    expected = view[::-1] if descending else view
    size = rng.randint(1, 13)
    fetch = fetcher(view)

    # Forwards from the start to the end.
    pages = [await read_page(fetch, descending, size, "", "v")]
    while pages[-1].next_token:
        pages.append(await read_page(fetch, descending, size, pages[-1].next_token, "v"))
    assert [s for p in pages for s in seqs(p)] == expected
    assert pages[0].previous_token == ""
    assert all(len(p.items) == size for p in pages[:-1])

    # Backwards from the last page to the start: the same pages, in reverse.
    back = [pages[-1]]
    while back[-1].previous_token:
        back.append(await read_page(fetch, descending, size, back[-1].previous_token, "v"))
    assert [s for p in reversed(back) for s in seqs(p)] == expected

    # A random walk: every page is the contiguous slice right after (or
    # before) the one it came from.
    page = pages[0]
    for _ in range(30):
        forward = rng.random() < 0.5
        token = page.next_token if forward else page.previous_token
        if not token:
            continue
        moved = await read_page(fetch, descending, size, token, "v")
        if forward:
            start = expected.index(seqs(page)[-1]) + 1
            assert seqs(moved) == expected[start : start + size]
        else:
            end = expected.index(seqs(page)[0])
            assert seqs(moved) == expected[max(0, end - size) : end]
        page = moved


async def test_token_of_another_view_or_forged_is_invalid_argument() -> None:
    fetch = fetcher(list(range(1, 11)))
    first = await read_page(fetch, False, 3, "", "view-a")
    with pytest.raises(InvalidArgument):
        await read_page(fetch, False, 3, first.next_token, "view-b")
    for forged in [encode_token({"d": "x", "s": 1, "v": "view-a"}), encode_token({"d": "n", "s": "1"}), "%%"]:
        with pytest.raises(InvalidArgument):
            await read_page(fetch, False, 3, forged, "view-a")


async def test_tokens_issued_before_backward_paging_still_work() -> None:
    page = await read_page(fetcher(list(range(1, 11))), False, 3, encode_token({"seq": 5}), "v")
    assert seqs(page) == [6, 7, 8] and page.next_token and page.previous_token
