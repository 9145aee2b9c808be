// The composer's two pickers: "/" at the start of a word opens the skills
// (with their descriptions) and forces the chosen one on the next run; "@"
// opens the pages and sources this conversation may read and inserts a
// mention (@page:<id>, @connector:<name>, @mcp:<server>) the engine reads.
// A listbox driven from the textarea (aria-activedescendant): arrows move,
// Enter or Tab chooses, Escape closes. What the user is working on (the page
// and the text selected there) rides along with the next message as its
// context, shown above the box until it is sent or removed: never pasted
// into the message.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { state } from "./chat-state.js";

const picker = { kind: null, items: [], active: 0, start: 0, skills: null, pages: null };
export const forced = [];

async function skills() {
  picker.skills ||= (await json("/skills?page_size=500")).skills.filter((s) => s.enabled !== false);
  return picker.skills;
}

async function pages() {
  picker.pages ||= (await json("/pages?page_size=500")).pages;
  return picker.pages;
}

// The word being typed at the caret, if it starts with / or @.
function trigger() {
  const box = $("message");
  const before = box.value.slice(0, box.selectionStart);
  const match = /(^|\s)([/@])([^\s]*)$/.exec(before);
  if (!match) return null;
  return { kind: match[2], query: match[3].toLowerCase(), start: before.length - match[3].length - 1 };
}

async function candidates(kind, query) {
  if (kind === "/") {
    // Names that start with what was typed first, then names holding it, then descriptions.
    const rank = (s) => {
      const name = s.name.toLowerCase();
      if (name.startsWith(query)) return 0;
      if (name.includes(query)) return 1;
      return (s.description || "").toLowerCase().includes(query) ? 2 : 3;
    };
    return (await skills())
      .map((s) => [rank(s), s])
      .filter(([r]) => r < 3)
      .sort((a, b) => a[0] - b[0])
      .map(([, s]) => ({ id: s.id, label: `/${s.name}`, detail: s.description, value: s.name }));
  }
  const allowed = state.allowed || { workspace: true, connectors: [], mcp_servers: [] };
  const sources = state.sources || { connectors: [], mcp_servers: [] };
  const items = [];
  if (allowed.workspace !== false) {
    for (const p of await pages())
      items.push({ id: `page:${p.id}`, label: p.title, detail: t("page"), value: `@page:${p.id}` });
  }
  for (const c of sources.connectors) {
    if ((allowed.connectors || []).includes(c.name))
      items.push({
        id: `connector:${c.name}`,
        label: c.title || c.name,
        detail: t("connector"),
        value: `@connector:${c.name}`,
      });
  }
  for (const m of sources.mcp_servers) {
    if ((allowed.mcp_servers || []).includes(m.name))
      items.push({ id: `mcp:${m.name}`, label: m.title || m.name, detail: t("MCP server"), value: `@mcp:${m.name}` });
  }
  return items.filter((i) => i.label.toLowerCase().includes(query) || i.value.toLowerCase().includes(query));
}

function close() {
  picker.kind = null;
  $("picker").hidden = true;
  $("picker-status").textContent = "";
  $("message").removeAttribute("aria-activedescendant");
}

function render() {
  const list = $("picker");
  list.setAttribute("aria-label", picker.kind === "/" ? t("Skills") : t("Pages and sources"));
  list.replaceChildren(
    ...(picker.items.length
      ? picker.items.map((item, index) => {
          const option = el(
            "li",
            {
              id: `pick-${index}`,
              role: "option",
              "aria-selected": String(index === picker.active),
              className: index === picker.active ? "active" : "",
            },
            el("strong", { textContent: item.label }),
            item.detail ? el("span", { className: "meta", textContent: ` — ${item.detail}` }) : null,
          );
          option.onmousedown = (event) => {
            event.preventDefault();
            picker.active = index;
            choose();
          };
          return option;
        })
      : [
          el("li", {
            className: "empty",
            role: "option",
            "aria-disabled": "true",
            textContent:
              picker.kind === "/"
                ? t("No skill matches.")
                : t("No page or source matches (only the sources ticked in All sources)."),
          }),
        ]),
  );
  list.hidden = false;
  $("picker-status").textContent = t("{count} suggestions: arrows to move, Enter to choose, Escape to close.", {
    count: picker.items.length,
  });
  if (picker.items.length) $("message").setAttribute("aria-activedescendant", `pick-${picker.active}`);
}

async function update() {
  const found = trigger();
  if (!found) return close();
  const items = await candidates(found.kind, found.query);
  const current = trigger(); // typing went on while loading
  if (!current || current.kind !== found.kind || current.query !== found.query) return undefined;
  Object.assign(picker, {
    kind: found.kind,
    items,
    start: found.start,
    active: Math.min(picker.active, Math.max(items.length - 1, 0)),
  });
  render();
  return undefined;
}

function choose() {
  const item = picker.items[picker.active];
  if (!item) return close();
  const box = $("message");
  const end = box.selectionStart;
  if (picker.kind === "/") {
    // The chosen skill is forced on the next run; its "/word" leaves the text.
    if (!forced.includes(item.value)) forced.push(item.value);
    box.value = box.value.slice(0, picker.start) + box.value.slice(end).replace(/^\s/, "");
    box.selectionStart = box.selectionEnd = picker.start;
    renderForced();
  } else {
    const text = `${item.value} `;
    box.value = box.value.slice(0, picker.start) + text + box.value.slice(end);
    box.selectionStart = box.selectionEnd = picker.start + text.length;
  }
  close();
  box.focus();
  return undefined;
}

export function renderForced() {
  $("forced-skills").replaceChildren(
    ...forced.map((name) => {
      const remove = el("button", {
        type: "button",
        className: "small",
        textContent: "×",
        "aria-label": t("Do not force {name}", { name }),
      });
      remove.onclick = () => {
        forced.splice(forced.indexOf(name), 1);
        renderForced();
        $("message").focus();
      };
      return el(
        "span",
        { className: "forced chip", dataset: { skill: name } },
        t("Skill: {name}", { name }),
        " ",
        remove,
      );
    }),
  );
  $("forced-skills").hidden = !forced.length;
}

export function takeForced() {
  const names = forced.splice(0);
  renderForced();
  return names;
}

// The run context's limits (services/shared/run_context.py): a longer
// selection is cut rather than refused.
const MAX_SELECTION_CHARS = 4000;
const MAX_TITLE_CHARS = 200;
let attached = null;

// Attaches {page: {id, title, type}, selections: [{text, block_id}]} to the next message.
export function attachContext({ page = null, selections = [] }) {
  const kept = selections
    .map((s) => ({ text: s.text.slice(0, MAX_SELECTION_CHARS), block_id: s.block_id || "" }))
    .filter((s) => s.text.trim());
  attached = {
    ...(page ? { page: { ...page, title: (page.title || "").slice(0, MAX_TITLE_CHARS) } } : {}),
    selections: kept,
  };
  renderContext();
}

export function clearContext() {
  attached = null;
  renderContext();
}

function renderContext() {
  const box = $("run-context");
  if (!attached) {
    box.replaceChildren();
    box.hidden = true;
    return;
  }
  const remove = el("button", {
    type: "button",
    className: "small",
    textContent: "×",
    "aria-label": t("Do not send this context"),
  });
  remove.onclick = () => {
    clearContext();
    $("message").focus();
  };
  const parts = [];
  const { page, selections } = attached;
  if (page && page.type !== "chat") parts.push(t("Page: {title}", { title: page.title || page.id }));
  const first = selections[0]?.text.replace(/\s+/g, " ").trim() || "";
  if (first)
    parts.push(
      t("Selection: “{text}”", { text: first.length > 60 ? `${first.slice(0, 59)}…` : first }) +
        (selections.length > 1 ? ` (+${selections.length - 1})` : ""),
    );
  box.replaceChildren(
    el(
      "span",
      { className: "forced chip context", title: selections.map((s) => s.text).join("\n\n") },
      parts.join(" · "),
      " ",
      remove,
    ),
  );
  box.hidden = false;
}

// The context to send with the message, once: the chip goes with it.
export function takeContext() {
  const context = attached;
  clearContext();
  return context;
}

export function wireComposer() {
  const box = $("message");
  box.setAttribute("aria-controls", "picker");
  box.setAttribute("aria-autocomplete", "list");
  box.addEventListener("input", guard(update));
  // Closed a moment after the box loses focus (a click on an option lands
  // first), unless the focus came back meanwhile: a quick click elsewhere then
  // a new "/" must not have its fresh menu closed by the earlier blur.
  box.addEventListener("blur", () =>
    setTimeout(() => {
      if (document.activeElement !== box) close();
    }, 150),
  );
  box.addEventListener("keydown", (event) => {
    if (!picker.kind) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      picker.active = (picker.active + step + picker.items.length) % Math.max(picker.items.length, 1);
      render();
    } else if ((event.key === "Enter" && !event.ctrlKey && !event.metaKey) || event.key === "Tab") {
      if (!picker.items.length) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      choose();
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
  // Pages or sources may change while the page is open.
  document.addEventListener("instructions-changed", () => {
    picker.pages = null;
  });
}
