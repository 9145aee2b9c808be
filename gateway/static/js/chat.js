// The chat view: sending a message (confirmed first when the model is
// web-only) and the view's controls wired. The parts live beside it: the
// conversations list and history, the All-sources popover and model
// selector, suggested actions, runs as they stream and their record.

import { API, $, guard } from "./core.js";
import { language, t } from "./i18n.js";
import { settled, state } from "./chat-state.js";
import { takeContext, takeForced } from "./composer.js";
import { loadConversations, newConversation } from "./conversations.js";
import { renderSourceChecks, selectedModel } from "./models.js";
import { bodyProjectId } from "./projects.js";
import { runBlock } from "./run-block.js";
import { stopRun, stream } from "./run-stream.js";
import { toggleSources } from "./sources-popover.js";
import { loadChips } from "./suggestions.js";

async function send(text) {
  const block = runBlock(text);
  $("log").append(block.item);
  const model = $("model").value;
  // The run reads the chosen project's notes, context and live state, and
  // gets what the user is working on as its context.
  const context = takeContext();
  const body = JSON.stringify({
    message: text,
    model,
    forced_skills: takeForced(),
    request_id: crypto.randomUUID(),
    project_id: bodyProjectId(),
    ...(context ? { context } : {}),
    // The run's notices, proposals and title in the interface's language.
    language: language(),
  });
  await stream(block, () =>
    fetch(`${API}/conversations/${state.conversationId}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
    }),
  );
  await loadConversations();
}

async function submit() {
  await settled();
  const text = $("message").value.trim();
  if (!text || state.running) return;
  // A web-only model: say so before sending, and send only once confirmed.
  if (selectedModel().web_only && !state.webConfirmed) {
    $("web-confirm-text").textContent = t("{model} will not read your workspace, pages or connectors. Send anyway?", {
      model: selectedModel().label,
    });
    $("web-confirm").hidden = false;
    $("web-confirm-send").focus();
    return;
  }
  state.webConfirmed = false;
  $("web-confirm").hidden = true;
  $("message").value = "";
  $("send").disabled = true;
  try {
    if (!state.conversationId) await newConversation();
    await send(text);
  } finally {
    $("send").disabled = false;
  }
}

export function wireChat(opened) {
  let searchTimer = null;
  $("search").oninput = () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(guard(loadConversations), 150);
  };
  $("new").onclick = guard(newConversation);
  $("sources-button").onclick = toggleSources;
  $("sources-popover").onkeydown = (event) => {
    if (event.key === "Escape") {
      toggleSources();
      $("sources-button").focus();
    }
  };
  $("model").onchange = () => {
    state.webConfirmed = false;
    $("web-confirm").hidden = true;
    renderSourceChecks();
  };
  $("web-confirm-send").onclick = guard(() => {
    state.webConfirmed = true;
    return submit();
  });
  $("web-confirm-cancel").onclick = () => {
    $("web-confirm").hidden = true;
    $("message").focus();
  };
  $("composer").onsubmit = guard(async (event) => {
    event.preventDefault();
    await opened();
    await submit();
  });
  $("message").onkeydown = (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
  };
  $("stop").onclick = guard(stopRun);
  // Selecting text in the conversation brings actions on it; a click
  // elsewhere in the conversation takes them away (a click on a chip does not).
  let selected = "";
  let selectionTimer = null;
  document.addEventListener("selectionchange", () => {
    clearTimeout(selectionTimer);
    selectionTimer = setTimeout(() => {
      const selection = document.getSelection();
      const inLog = selection.rangeCount > 0 && $("log").contains(selection.getRangeAt(0).commonAncestorContainer);
      const text = inLog ? selection.toString().trim() : "";
      if (text ? text === selected : !(selected && inLog)) return;
      selected = text;
      const from = inLog ? selection.getRangeAt(0).commonAncestorContainer : null;
      const block = (from?.nodeType === Node.ELEMENT_NODE ? from : from?.parentElement)?.closest(".run");
      guard(() => loadChips(text, block?.dataset.runId || ""))();
    }, 250);
  });
}
