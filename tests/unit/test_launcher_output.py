"""The launcher copies each child's output for as long as the child lives:
a line longer than the stream's buffer is left out with a marker, and the
lines after it still come through (a child whose output nobody reads would
block on its next write)."""

from __future__ import annotations

import asyncio

import pytest

from services.launcher import pump


async def test_a_line_past_the_buffer_is_left_out_and_the_next_lines_still_come(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reader = asyncio.StreamReader()  # the 64 KiB limit of a subprocess pipe's reader
    reader.feed_data(b"first\n" + b"x" * 200_000 + b"\nafter the long one\n")
    reader.feed_eof()
    await asyncio.wait_for(pump("engine", reader, color=False), 5)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == " engine | first"
    assert lines[-1] == " engine | after the long one"
    assert any("longer than 64 KiB, left out" in line for line in lines)
    assert all(len(line) < 70_000 for line in lines)
