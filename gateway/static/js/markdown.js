// A model's answer as Markdown: parsed by marked, its HTML sanitised by
// DOMPurify (both vendored from npm), code blocks given a copy button.

import { marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";
import { el } from "./core.js";
import { t } from "./i18n.js";

// Text in which Markdown could mean anything: a character of its syntax or
// of HTML, a line that starts a block (heading, quote, list, code, rule,
// setext underline), a paragraph break or hard break, a bare link or address.
const MARKUP =
  /[\\`*_[\]<>&|~@\t]|^ {0,3}(#|>|[-+](\s|$)|\d+[.)](\s|$))|^[ :=-]*[=-][ :=-]*$|^ {4}|\n\s*\n| {2}\n|https?:|www\./m;

// Plain text is one paragraph as marked would make it, drawn without parsing
// and sanitising: a long thread draws thousands of entries.
export const isPlainParagraph = (text) => Boolean(text.trim()) && !MARKUP.test(text);

export function renderMarkdown(target, text) {
  target.dataset.raw = text;
  if (isPlainParagraph(text)) {
    target.replaceChildren(el("p", { textContent: text.trim() }));
    return;
  }
  target.innerHTML = DOMPurify.sanitize(marked.parse(text, { async: false, gfm: true }));
  for (const link of target.querySelectorAll("a[href]")) {
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  for (const pre of target.querySelectorAll("pre")) {
    const copy = el("button", {
      type: "button",
      className: "copy",
      textContent: t("Copy"),
      "aria-label": t("Copy code"),
    });
    copy.onclick = async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        copy.textContent = t("Copied");
      } catch {
        copy.textContent = t("Copy failed");
      }
    };
    const box = el("div", { className: "code" });
    pre.replaceWith(box);
    box.append(copy, pre);
  }
}

// Streaming: the answer grows by deltas; it is re-rendered at most once a frame.
export function streamMarkdown(target) {
  let text = "";
  let pending = false;
  return {
    append(delta) {
      text += delta;
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        renderMarkdown(target, text);
      });
    },
    set(value) {
      text = value;
      renderMarkdown(target, text);
    },
  };
}
