// The All-sources popover: the workspace, memory, connectors and MCP servers
// this conversation may read, each box saved to the conversation as ticked.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { beforeNextMessage, settled, state } from "./chat-state.js";
import { newConversation } from "./conversations.js";

function sourceCheckbox(kind, option) {
  const box = el("input", { type: "checkbox", dataset: { kind, name: option.name } });
  box.onchange = guard(() => saveSources(box));
  return el("label", {}, box, " " + (option.title || option.name));
}

export async function loadSources() {
  state.sources = await json("/sources");
  const { connectors, mcp_servers: mcp } = state.sources;
  $("source-connectors").replaceChildren(
    ...(connectors.length ? [el("strong", { textContent: t("Connectors") })] : []),
    ...connectors.map((c) => sourceCheckbox("connector", c)),
  );
  $("source-mcp").replaceChildren(
    ...(mcp.length ? [el("strong", { textContent: t("MCP servers") })] : []),
    ...mcp.map((m) => sourceCheckbox("mcp", m)),
  );
  for (const box of [$("source-workspace"), $("source-memory")]) box.onchange = guard(() => saveSources(box));
}

// Saves what this box changes, and only that: the conversation keeps the
// rest (memory stays off when a connector is ticked, and boxes a web-only
// model shows unticked are not saved as such).
function saveSources(box) {
  const pick = (kind) =>
    [...document.querySelectorAll(`#sources-popover input[data-kind=${kind}]:checked`)].map((b) => b.dataset.name);
  const { kind } = box.dataset;
  const change =
    kind === "connector"
      ? { connectors: pick("connector") }
      : kind === "mcp"
        ? { mcp_servers: pick("mcp") }
        : { [kind]: box.checked };
  return beforeNextMessage(putSources(change, settled()));
}

async function putSources(change, earlier) {
  await earlier; // to the conversation being opened, if one is
  if (!state.conversationId) await newConversation();
  const conversation = await json(`/conversations/${state.conversationId}/sources`, {
    method: "PUT",
    body: JSON.stringify(change),
  });
  state.allowed = conversation.allowed_sources;
}

export function toggleSources() {
  const popover = $("sources-popover");
  popover.hidden = !popover.hidden;
  $("sources-button").setAttribute("aria-expanded", String(!popover.hidden));
}
