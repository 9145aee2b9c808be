// The model selector, and what the chosen model lets the All-sources popover
// offer: a web-only model reads neither the workspace, connectors nor memory.

import { $, el, json } from "./core.js";
import { t } from "./i18n.js";
import { state } from "./chat-state.js";

export function modelLabel(m) {
  return m.label + (m.web_only ? ` (${t("web only")})` : "") + (m.expensive ? ` (${t("expensive")})` : "");
}

export async function loadModels(settings) {
  const { models } = await json("/models");
  state.models = models;
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, textContent: modelLabel(m) })));
  $("model").value = settings.default_model || "auto";
}

export function selectedModel() {
  return state.models.find((m) => m.id === $("model").value) || { id: "auto", web_only: false };
}

export function renderSourceChecks() {
  const allowed = state.allowed || { workspace: true, connectors: [], mcp_servers: [] };
  const webOnly = selectedModel().web_only;
  for (const box of document.querySelectorAll("#sources-popover input[type=checkbox]")) {
    const { kind, name } = box.dataset;
    const ticked =
      kind === "workspace" || kind === "memory"
        ? allowed[kind] !== false
        : kind === "connector"
          ? (allowed.connectors || []).includes(name)
          : (allowed.mcp_servers || []).includes(name);
    // A web-only model reads neither the workspace, connectors nor memory: shown unticked for its runs.
    box.checked = ticked && !(webOnly && kind !== "mcp");
    box.disabled = webOnly && kind !== "mcp";
  }
  const warning = $("web-warning");
  warning.hidden = !webOnly;
  warning.textContent = webOnly
    ? t("{model} is web-only: your workspace and connectors will not be read for its runs.", {
        model: selectedModel().label,
      })
    : "";
}
