// The conversations list (pinned first, search by title, rename, pin), and
// opening one or starting a new one.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { beforeNextMessage, state } from "./chat-state.js";
import { clearContext } from "./composer.js";
import { loadHistory } from "./history.js";
import { resumeRun } from "./run-stream.js";

let listing = 0;

export async function loadConversations() {
  const q = $("search").value.trim();
  const asked = ++listing;
  const { conversations } = await json("/conversations" + (q ? `?q=${encodeURIComponent(q)}` : ""));
  // Answers may come back out of order: only the newest request's is drawn.
  if (asked !== listing) return conversations;
  // A title being renamed stays as the person left it: a refresh that lands
  // meanwhile (after a run, another click) must not take their typing away.
  const input = $("conversations").querySelector(".rename-input");
  const editing = input?.closest("li");
  const focused = document.activeElement === input;
  $("conversations").replaceChildren(
    ...conversations.map((c) => (editing && editing.dataset.id === c.id ? editing : conversationItem(c))),
  );
  if (focused && input.isConnected) input.focus();
  return conversations;
}

function conversationItem(c) {
  const title = c.title || t("New conversation");
  const open = el("button", { type: "button", className: "open", textContent: title });
  open.onclick = guard(() => openConversation(c.id));
  const pinLabel = c.pinned ? t("Unpin") : t("Pin");
  const pin = el("button", {
    type: "button",
    className: "small pin",
    textContent: pinLabel,
    "aria-pressed": String(c.pinned),
    "aria-label": `${pinLabel} ${title}`,
  });
  pin.onclick = guard(async () => {
    await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ pinned: !c.pinned }) });
    await loadConversations();
  });
  const rename = el("button", {
    type: "button",
    className: "small rename",
    textContent: t("Rename"),
    "aria-label": t("Rename {title}", { title }),
  });
  const item = el(
    "li",
    {
      dataset: { id: c.id },
      className: [c.pinned ? "pinned" : "", c.id === state.conversationId ? "active" : ""].join(" ").trim(),
    },
    open,
    pin,
    rename,
  );
  rename.onclick = () => {
    const input = el("input", {
      value: c.title,
      className: "rename-input",
      "aria-label": t("New title"),
      maxLength: 200,
    });
    item.replaceChildren(input);
    input.focus();
    input.select();
    input.onkeydown = guard(async (event) => {
      if (event.key === "Escape") {
        input.remove(); // no longer renaming: the refresh draws the item again
        await loadConversations();
      }
      if (event.key !== "Enter" || !input.value.trim()) return;
      event.preventDefault();
      await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ title: input.value.trim() }) });
      input.remove();
      await loadConversations();
    });
  };
  return item;
}

export function openConversation(id) {
  if (id !== state.conversationId) clearContext(); // it was about the other conversation
  return beforeNextMessage(showConversation(id));
}

export function newConversation() {
  clearContext();
  return beforeNextMessage(createConversation());
}

async function showConversation(id) {
  const shown = await loadHistory(id);
  if (!shown) return; // another conversation was opened meanwhile
  await loadConversations();
  // Reloading mid-run: the newest run is still going, so attach to its stream.
  if (shown.running && state.conversationId === id) resumeRun(shown.running.id);
}

async function createConversation() {
  const conversation = await json("/conversations", {
    method: "POST",
    body: JSON.stringify({ allowed_sources: state.allowed || { workspace: true } }),
  });
  state.conversationId = conversation.id;
  sessionStorage.setItem("conversation", conversation.id);
  state.allowed = conversation.allowed_sources;
  $("log").replaceChildren();
  await loadConversations();
}
