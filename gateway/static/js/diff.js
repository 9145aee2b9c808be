// A proposal's diff (a TextDiff: hunks of added, removed and context lines)
// as the page shows it, one line each, marked "+ ", "- " or "  " so that the
// change reads without its colour. Page proposals in the chat and note
// proposals in the Memory view share it.

import { el } from "./core.js";

const MARK = { added: "+ ", removed: "- ", context: "  " };

export function diffLines(diff) {
  return (diff?.hunks || [])
    .flatMap((hunk) => hunk.lines)
    .map((line) => el("div", { className: line.kind, textContent: (MARK[line.kind] ?? "  ") + line.text }));
}
