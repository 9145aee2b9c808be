// Personalisation: name, avatar, chat mode, default model, language, and the
// active instruction page.

import { $, el, guard, json } from "./core.js";
import { language, setLanguage, t } from "./i18n.js";
import { state } from "./chat-state.js";
import { modelLabel } from "./models.js";

export function applySettings(settings) {
  $("name-view").textContent = settings.display_name || t("Your agent");
  $("avatar-view").textContent = (settings.avatar && settings.avatar.emoji) || "";
  document.body.className = `mode-${settings.chat_mode}`;
}

export async function openPersonal() {
  const [settings, pages, { templates }] = await Promise.all([
    json("/personal-settings"),
    json("/personal-settings/instruction-pages"),
    json("/instruction-templates"),
  ]);
  $("display-name").value = settings.display_name;
  $("avatar").value = (settings.avatar && settings.avatar.emoji) || "";
  $("chat-mode").value = settings.chat_mode;
  $("default-model").replaceChildren(
    ...state.models.map((m) => el("option", { value: m.id, textContent: modelLabel(m) })),
  );
  $("default-model").value = settings.default_model || "auto";
  $("language").value = localStorage.getItem("switchboard.language") || "";
  renderPages(pages);
  // The interface's language first: its first template is the one offered.
  const ordered = [...templates].sort((a, b) => (b.language === language()) - (a.language === language()));
  $("template").replaceChildren(...ordered.map((tpl) => el("option", { value: tpl.id, textContent: tpl.title })));
  $("personal-status").textContent = "";
  $("personal").showModal();
}

export function renderPages(pages) {
  const options = pages.pages.map((p) =>
    el("option", {
      value: p.page_id,
      disabled: p.state !== "readable",
      textContent: p.title + (p.state !== "readable" ? ` (${t("no longer readable")})` : ""),
    }),
  );
  $("instruction-page").replaceChildren(
    el("option", { value: "", textContent: t("None"), disabled: true }),
    ...options,
  );
  $("instruction-page").value = pages.active_instruction_page_id || "";
  $("page-notice").textContent = pages.notice;
}

async function savePersonal() {
  const avatar = $("avatar").value ? { emoji: $("avatar").value } : {};
  const settings = await json("/personal-settings", {
    method: "PUT",
    body: JSON.stringify({
      display_name: $("display-name").value,
      avatar,
      chat_mode: $("chat-mode").value,
      default_model: $("default-model").value,
    }),
  });
  const changedLanguage = $("language").value !== (localStorage.getItem("switchboard.language") || "");
  setLanguage($("language").value);
  applySettings(settings);
  // Every view is drawn anew in the chosen language.
  if (changedLanguage) location.reload();
  else $("personal-status").textContent = t("Saved.");
}

async function switchPage() {
  await json("/personal-settings/instructions-page/active", {
    method: "PUT",
    body: JSON.stringify({ page_id: $("instruction-page").value }),
  });
  renderPages(await json("/personal-settings/instruction-pages"));
  $("personal-status").textContent = t("Active instruction page switched.");
  document.dispatchEvent(new CustomEvent("instructions-changed"));
}

async function createPage() {
  await json("/personal-settings/instructions-page", {
    method: "POST",
    body: JSON.stringify({
      template_id: $("template").value,
      title: $("page-title").value.trim(),
      request_id: crypto.randomUUID(),
    }),
  });
  $("page-title").value = "";
  renderPages(await json("/personal-settings/instruction-pages"));
  $("personal-status").textContent = t("Instruction page created and made active.");
  document.dispatchEvent(new CustomEvent("instructions-changed"));
}

export function wirePersonal() {
  const status = () => $("personal-status");
  $("personalise").onclick = guard(openPersonal);
  $("save-personal").onclick = guard(savePersonal, status);
  $("instruction-page").onchange = guard(switchPage, status);
  $("create-page").onclick = guard(createPage, status);
}
