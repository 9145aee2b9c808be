// What the engine and memory say, in the reader's language. The engine words
// each notice and run error in the run's language (its run_started event
// says which; the page asks for its own), with its details (a model's name,
// a source, a cause): in the reader's language, its words are shown as they
// are. Otherwise the page shows the sentence for the code in the interface's
// language, with the engine's own words beside it as the detail. Handoff
// summaries keep their English section headings (models read them); the page
// shows them translated.

import { el } from "./core.js";
import { language, t, tLater } from "./i18n.js";

// Every notice code the engine emits (tests/unit/test_web_texts.py checks the
// list against the engine's source).
export const NOTICE_TEXT = {
  MEMORY_UNAVAILABLE: tLater(
    "Memory is unavailable: this answer uses no recalled notes, personal settings, instruction page or mentioned pages.",
  ),
  ROUTER_UNAVAILABLE: tLater(
    "Routing is unavailable: no skill was applied automatically, and the fallback model answers.",
  ),
  ARBITER_FAILED: tLater("The model that picks skills did not answer: the skills were chosen without it."),
  MODEL_CHOICE: tLater("About the chosen model:"),
  WEB_ONLY_MODEL: tLater("This model is web-only: it reads no workspace content in this run."),
  SUMMARY_MODEL_FAILED: tLater("The conversation summary was written by the rules: the summary model did not answer."),
  SOURCES_WITHHELD: tLater("This model is web-only: some of this conversation's sources will not be read in this run."),
  MENTION_NOT_ALLOWED: tLater(
    "A mentioned source is not among this conversation's allowed sources: it will not be read.",
  ),
  TOOLS_UNAVAILABLE: tLater("Some tools are not available in this run."),
  WRITE_REFUSED: tLater("A write to memory was refused: only your own message can ask for one, in its own words."),
  INSTRUCTION_PAGE_UNREADABLE: tLater("The active instruction page cannot be read: it was skipped."),
  INSTRUCTION_PAGE_TRUNCATED: tLater("The instruction page was cut to its budget."),
  INJECTION_STRATEGY_UNAVAILABLE: tLater(
    "The agent's injection strategy cannot be used with this provider: its own strategy delivers the same context.",
  ),
  REMOTE_AGENT_FAILED: tLater("A remote agent gave no answer."),
  PROVIDER_SWITCHED: tLater("Provider switched: the agent starts from the handoff summary and the recent entries."),
  QUOTA_EXCEEDED: tLater("Memory is full: nothing was written. Delete or decide something first."),
  RATE_LIMITED: tLater("Another agent could not be asked: too many requests were started in the last minute."),
  TOO_MANY_RUNS: tLater("Another agent could not be asked: too many requests are in progress."),
  NOTE_PROPOSED: tLater("The agent proposed a note for the project's memory; review it in Memory."),
  PROJECT_MEMORY_UNREADABLE: tLater(
    "You are not a member of this agent's project: this answer uses none of its notes, project context or live state.",
  ),
};

// The run errors whose cause is worth a sentence of its own.
export const ERROR_TEXT = {
  CANCELLED: tLater("The run was stopped."),
  INTERRUPTED: tLater("The engine running this run stopped."),
  BUDGET_EXCEEDED: tLater("The run reached its budget."),
  INTERNAL: tLater("The engine met an unexpected error."),
  ERROR_REASON_DEPENDENCY_UNAVAILABLE: tLater("A service or the model provider is unavailable."),
  ERROR_REASON_INVALID_ARGUMENT: tLater("The request was refused as invalid."),
  ERROR_REASON_NOT_FOUND: tLater("Something the run needed was not found."),
  ERROR_REASON_TOO_LARGE: tLater("The request is too large."),
  ERROR_REASON_FAILED_PRECONDITION: tLater("The run could not start in this state."),
  ERROR_REASON_PERMISSION_DENIED: tLater("You are not allowed to ask this agent or read its thread."),
  ERROR_REASON_QUOTA_EXCEEDED: tLater("A memory quota is full."),
  ERROR_REASON_RATE_LIMITED: tLater("Too many requests were started in the last minute."),
  ERROR_REASON_TOO_MANY_RUNS: tLater("Too many requests are in progress."),
};

// The section headings of a handoff summary, as memory writes them.
export const HANDOFF_HEADINGS = [
  tLater("Current objective"),
  tLater("Active requests by requester"),
  tLater("Recent decisions"),
  tLater("Blockers"),
  tLater("Last correlated answer"),
];

// The engine's words (in ``said``, the run's language), said in the
// interface's language: as they are when they already are in it, else the
// sentence for the code where one exists: [sentence, detail] (detail: the
// engine's own words, only when they are not what the reader already sees).
export function localized(table, code, message, said = "en") {
  const sentence = table[code];
  if (message && said === language()) return [message, ""];
  if (!sentence) return [message || "", ""];
  return [t(sentence), message || ""];
}

export function noticeView(code, message, said = "en") {
  const [text, detail] = localized(NOTICE_TEXT, code, message, said);
  return el(
    "p",
    { className: "notice", dataset: { code } },
    text,
    detail ? el("small", { className: "detail", lang: said, textContent: ` (${detail})` }) : null,
    // A proposed note waits in the Memory view, where a member reviews it.
    code === "NOTE_PROPOSED"
      ? el("span", {}, " ", el("a", { href: "#memory", className: "review-proposals", textContent: t("Review") }))
      : null,
  );
}

// A run's cause of ending, from its error code when the live stream gave one.
export function errorCause(code, message, said = "en") {
  const [text, detail] = localized(ERROR_TEXT, code, message, said);
  return detail ? `${text} (${detail})` : text;
}

// Which branch of the Skill Router decided (the record's RouteBranch), as a
// reader says it; an unknown one as it came.
export const BRANCH_TEXT = {
  ROUTE_BRANCH_FORCED: tLater("the skills you chose"),
  ROUTE_BRANCH_HIGH: tLater("a clear match"),
  ROUTE_BRANCH_GREY_LLM: tLater("a possible match, decided by the arbiter model"),
  ROUTE_BRANCH_GREY_DETERMINISTIC: tLater("a possible match, decided by the scores alone"),
  ROUTE_BRANCH_NONE: tLater("no skill matched closely enough"),
};

export function branchText(branch) {
  const sentence = BRANCH_TEXT[branch || "ROUTE_BRANCH_NONE"];
  return sentence ? t(sentence) : branch;
}

// How a skill came to be used (a skill_used event's invocation).
export const INVOCATION_TEXT = { auto: tLater("auto"), manual: tLater("manual") };

export const invocationText = (invocation) => t(INVOCATION_TEXT[invocation] ?? invocation);

// "## Current objective" and the like, in the interface's language.
export function localizeHeadings(markdown) {
  if (language() === "en") return markdown;
  return HANDOFF_HEADINGS.reduce(
    (text, heading) => text.replaceAll(`## ${heading}\n`, `## ${t(heading)}\n`),
    markdown,
  ).replaceAll("(none)", t("(none)"));
}
