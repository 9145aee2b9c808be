"""Line diffs between two texts, for proposals (a proposed page update is
shown as a diff): the unified text and the same hunks as data,
both from one ``difflib.SequenceMatcher`` pass so they always agree. No gRPC."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import IntEnum

# Lines of context around each change, as `diff -u`.
CONTEXT_LINES = 3


class LineKind(IntEnum):
    """DiffLineKind of pages.proto."""

    CONTEXT = 1
    ADDED = 2
    REMOVED = 3


_PREFIX = {LineKind.CONTEXT: " ", LineKind.ADDED: "+", LineKind.REMOVED: "-"}


@dataclass(frozen=True)
class Hunk:
    """Lines are 1-based; a count of 0 is an empty range whose start is the
    line before it (0 at the top), as in ``diff -u``."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: tuple[tuple[LineKind, str], ...]


@dataclass(frozen=True)
class TextDiff:
    old_label: str
    new_label: str
    hunks: tuple[Hunk, ...]

    @property
    def added_lines(self) -> int:
        return sum(1 for hunk in self.hunks for kind, _ in hunk.lines if kind is LineKind.ADDED)

    @property
    def removed_lines(self) -> int:
        return sum(1 for hunk in self.hunks for kind, _ in hunk.lines if kind is LineKind.REMOVED)

    @property
    def unified(self) -> str:
        """The ``diff -u`` text; empty when the texts are equal."""
        if not self.hunks:
            return ""
        out = [f"--- {self.old_label}\n", f"+++ {self.new_label}\n"]
        for hunk in self.hunks:
            out.append(
                f"@@ -{_range(hunk.old_start, hunk.old_lines)} +{_range(hunk.new_start, hunk.new_lines)} @@\n"
            )
            out.extend(f"{_PREFIX[kind]}{text}\n" for kind, text in hunk.lines)
        return "".join(out)


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


def split_lines(text: str) -> list[str]:
    """Lines without their terminators; a missing final newline is not a change."""
    return text.splitlines()


def diff_texts(old: str, new: str, old_label: str = "old", new_label: str = "new") -> TextDiff:
    a, b = split_lines(old), split_lines(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks = []
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        lines: list[tuple[LineKind, str]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend((LineKind.CONTEXT, line) for line in a[i1:i2])
                continue
            lines.extend((LineKind.REMOVED, line) for line in a[i1:i2])
            lines.extend((LineKind.ADDED, line) for line in b[j1:j2])
        first, last = group[0], group[-1]
        old_count, new_count = last[2] - first[1], last[4] - first[3]
        hunks.append(
            Hunk(
                # difflib's convention: an empty range starts at the line before it.
                old_start=first[1] + 1 if old_count else first[1],
                old_lines=old_count,
                new_start=first[3] + 1 if new_count else first[3],
                new_lines=new_count,
                lines=tuple(lines),
            )
        )
    return TextDiff(old_label, new_label, tuple(hunks))


def apply_hunks(old: str, diff: TextDiff) -> list[str]:
    """The new text's lines rebuilt from ``old`` and the hunks: the property
    the tests check (the structured hunks carry the whole change)."""
    a = split_lines(old)
    out: list[str] = []
    position = 0  # 0-based index of the next unread line of ``a``
    for hunk in diff.hunks:
        start = hunk.old_start - 1 if hunk.old_lines else hunk.old_start
        out.extend(a[position:start])
        position = start
        for kind, text in hunk.lines:
            if kind is LineKind.ADDED:
                out.append(text)
                continue
            if a[position] != text:
                raise ValueError(f"hunk does not apply at old line {position + 1}")
            if kind is LineKind.CONTEXT:
                out.append(text)
            position += 1
    out.extend(a[position:])
    return out
