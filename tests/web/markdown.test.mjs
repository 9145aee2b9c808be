// The Markdown renderer's fast path: text it draws as one plain paragraph,
// without marked and DOMPurify, must be text marked would draw as just that.
import { test } from "node:test";
import assert from "node:assert/strict";
import { installPage, page } from "./page.mjs";

installPage();
const { isPlainParagraph } = await import(page("js/markdown.js"));
const { marked } = await import(page("vendor/marked.esm.js"));

test("sentences, numbers and punctuation are plain", () => {
  for (const text of [
    "Hello world.",
    "The answer is 42 (roughly), isn't it? Yes!",
    "one line\nand the next",
    "  padded  ",
    "Prices: 3 - 4 euros; 50% off",
  ])
    assert.equal(isPlainParagraph(text), true, JSON.stringify(text));
});

test("anything Markdown or HTML could mean goes to marked", () => {
  for (const text of [
    "**bold**",
    "_under_",
    "`code`",
    "a [link](x)",
    "a < b",
    "fish & chips",
    "a | table",
    "~~gone~~",
    "me@example.com",
    "tab\there",
    "# Heading",
    "> quote",
    "- item",
    "+ item",
    "1. first",
    "2) second",
    "Title\n=====",
    "Title\n---",
    "    indented code",
    "first\n\nsecond",
    "hard  \nbreak",
    "see https://example.com",
    "see www.example.com",
    "back\\slash",
  ])
    assert.equal(isPlainParagraph(text), false, JSON.stringify(text));
});

test("empty or blank text is not a paragraph", () => {
  assert.equal(isPlainParagraph(""), false);
  assert.equal(isPlainParagraph(" \n\t"), false);
});

test("what takes the fast path, marked draws as one paragraph of the same text", () => {
  // Markdown's near misses, drawn at random (a fixed seed: the same texts each run).
  const alphabet = "abhtpsw.:/ ,;!?()$%^{}=+-#'\"\n 1234ftxcom";
  let seed = 11;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  // Compared as HTML shows them: whitespace collapsed, quotes unescaped.
  const norm = (html) =>
    html
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/\s+/g, " ")
      .replace(/> /g, ">")
      .replace(/ </g, "<")
      .trim();
  let plain = 0;
  for (let i = 0; i < 5000; i++) {
    let text = "";
    const length = 1 + Math.floor(random() * 30);
    for (let n = 0; n < length; n++) text += alphabet[Math.floor(random() * alphabet.length)];
    if (!isPlainParagraph(text)) continue;
    plain += 1;
    const drawn = norm(marked.parse(text, { async: false, gfm: true }));
    assert.equal(drawn, norm(`<p>${text.trim()}</p>`), JSON.stringify(text));
  }
  assert.ok(plain > 500, `only ${plain} texts took the fast path`);
});
