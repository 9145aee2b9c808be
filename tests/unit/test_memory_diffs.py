"""Line diffs of proposals: the unified text is exactly `diff -u`'s (difflib),
and the structured hunks carry the whole change (they rebuild the new text)."""

from __future__ import annotations

import difflib
import random

import pytest

from services.memory.pages.diffs import LineKind, apply_hunks, diff_texts, split_lines


def reference(old: str, new: str) -> str:
    lines = difflib.unified_diff(split_lines(old), split_lines(new), "a", "b", lineterm="")
    return "".join(line + "\n" for line in lines)


CASES = [
    ("", ""),
    ("same\n", "same\n"),
    ("", "new line\n"),
    ("old line\n", ""),
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("one\ntwo\nthree", "one\ntwo\nthree\nfour"),
    ("x\n" * 20 + "middle\n" + "y\n" * 20, "x\n" * 20 + "centre\n" + "y\n" * 20),
    ("head\n" + "k\n" * 10 + "tail\n", "HEAD\n" + "k\n" * 10 + "TAIL\n"),
    ("# Tone\n\n- friendly\n", "# Tone\n\n- friendly\n- answer in French\n"),
]


@pytest.mark.parametrize(("old", "new"), CASES)
def test_unified_text_is_difflibs_and_hunks_rebuild_the_new_text(old: str, new: str) -> None:
    diff = diff_texts(old, new, "a", "b")
    assert diff.unified == reference(old, new)
    assert apply_hunks(old, diff) == split_lines(new)
    assert (diff.hunks == ()) == (split_lines(old) == split_lines(new))


def test_hunk_fields_for_a_one_line_change() -> None:
    diff = diff_texts("a\nb\nc\n", "a\nB\nc\n", "page@v1", "proposal")
    (hunk,) = diff.hunks
    assert (hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines) == (1, 3, 1, 3)
    assert hunk.lines == (
        (LineKind.CONTEXT, "a"),
        (LineKind.REMOVED, "b"),
        (LineKind.ADDED, "B"),
        (LineKind.CONTEXT, "c"),
    )
    assert (diff.added_lines, diff.removed_lines) == (1, 1)
    assert diff.unified.startswith("--- page@v1\n+++ proposal\n@@ -1,3 +1,3 @@\n")


def test_distant_changes_make_separate_hunks_and_an_insertion_into_empty_text_starts_at_0() -> None:
    old = "\n".join(f"line {i}" for i in range(1, 31))
    new = old.replace("line 2\n", "line two\n").replace("line 29", "line twenty-nine")
    assert len(diff_texts(old, new).hunks) == 2
    (insertion,) = diff_texts("", "first\n").hunks
    assert (insertion.old_start, insertion.old_lines, insertion.new_start, insertion.new_lines) == (
        0,
        0,
        1,
        1,
    )


def test_random_edits_round_trip() -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", ""]
    for _ in range(200):
        old = [rng.choice(words) for _ in range(rng.randrange(0, 30))]
        new = list(old)
        for _ in range(rng.randrange(0, 6)):
            op = rng.randrange(3)
            if op == 0 or not new:
                new.insert(rng.randrange(len(new) + 1), rng.choice(words))
            elif op == 1:
                del new[rng.randrange(len(new))]
            else:
                new[rng.randrange(len(new))] = rng.choice(words) + "!"
        old_text, new_text = "\n".join(old), "\n".join(new)
        diff = diff_texts(old_text, new_text, "a", "b")
        assert diff.unified == reference(old_text, new_text)
        assert apply_hunks(old_text, diff) == split_lines(new_text)
