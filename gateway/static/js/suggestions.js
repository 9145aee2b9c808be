// Suggested actions for the chat and the Instructions view: chips that
// prefill the chat's message (never start a run), with the selection as its
// context.

import { $, el, json } from "./core.js";
import { language } from "./i18n.js";
import { state } from "./chat-state.js";
import { attachContext } from "./composer.js";

// Suggested actions for a page type; with text selected, actions on that
// selection come first. A chip only prefills the chat's message (with
// `mention` appended, so the run reads the page); it never starts a run.
// `context` (the page and the selection) goes with that message as its
// context, not pasted into it.
export async function suggestions(target, pageType, selection = "", mention = "", context = null) {
  const query = new URLSearchParams({ page_type: pageType, selection: selection.slice(0, 2000), language: language() });
  const { actions } = await json(`/suggested-actions?${query}`);
  target.replaceChildren(
    ...actions.map((action) => {
      const chip = el("button", { type: "button", className: "chip", textContent: action.label });
      chip.onclick = () => {
        $("message").value = mention ? `${action.prompt}\n\n${mention} ` : action.prompt;
        if (context) attachContext(context);
        if (!location.hash || location.hash === "#chat") return $("message").focus();
        // Focused once the chat is shown: a hidden field cannot take the focus.
        window.addEventListener("hashchange", () => $("message").focus(), { once: true });
        location.hash = "#chat";
        return undefined;
      };
      return chip;
    }),
  );
}

// In the chat, the page is the conversation, and a selection's block is the
// answer it was taken from (its run's id).
export const loadChips = (selection = "", blockId = "") =>
  suggestions(
    $("chips"),
    "chat",
    selection,
    "",
    selection
      ? { page: { id: state.conversationId, type: "chat" }, selections: [{ text: selection, block_id: blockId }] }
      : null,
  );
