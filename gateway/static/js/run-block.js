// A run's block in the log: what the person asked, the steps, notices and
// answer (Markdown) as they stream, how the run ended and why, then from its
// record the model, the skills and the Sources panel of what it read.

import { el } from "./core.js";
import { t } from "./i18n.js";
import { streamMarkdown } from "./markdown.js";
import { whyThisSkill } from "./why-this-skill.js";

export function runBlock(text) {
  const item = el("div", { className: "msg run" });
  if (text) item.append(el("div", { className: "user", textContent: text }));
  const parts = {
    steps: el("ul", { className: "steps", "aria-label": t("Steps") }),
    notices: el("div", { className: "notices" }),
    answer: el("div", { className: "answer" }),
    status: el("p", { className: "run-status", hidden: true }),
    meta: el("div", { className: "meta" }),
    skill: el("div", { className: "skill" }),
    extra: el("div", { className: "extra" }),
  };
  item.append(parts.steps, parts.notices, parts.answer, parts.status, parts.meta, parts.skill, parts.extra);
  return { item, ...parts, text: streamMarkdown(parts.answer), runId: null };
}

// How a run ended, when not plainly done: each its own look, with its cause.
const ENDINGS = {
  cancelled: { icon: "■", label: "Cancelled" },
  budget_exceeded: { icon: "⚠", label: "Budget exceeded" },
  failed: { icon: "✗", label: "Failed" },
  waiting_approval: { icon: "‖", label: "Waiting for your approval" },
};

export function showEnding(block, status, cause) {
  block.item.dataset.status = status;
  const ending = ENDINGS[status];
  if (!ending) {
    block.status.hidden = true;
    return;
  }
  if (status === "waiting_approval" && !cause)
    cause = t("A proposed change to your instructions waits for your decision.");
  block.status.className = `run-status status-${status}`;
  block.status.replaceChildren(
    el("span", { className: "icon", "aria-hidden": "true", textContent: ending.icon + " " }),
    el("strong", { textContent: t(ending.label) }),
    cause ? el("span", { className: "cause", textContent: ` — ${cause}` }) : null,
  );
  block.status.hidden = false;
}

// "page:" / "page :": a source's kind as the Sources panel heads it.
const kindLabel = (kind) => t("{kind}:", { kind: t(kind) });

export function showRunRecord(block, run) {
  block.item.dataset.runId = run.id;
  block.runId = run.id;
  if (run.model) block.meta.textContent = t("Model: {model}", run);
  block.skill.textContent = run.skills.length
    ? t("Skill: {names}", { names: run.skills.map((s) => s.name).join(", ") })
    : "";
  if (run.status !== "running") showEnding(block, run.status, run.error);
  const panel = el(
    "section",
    { className: "sources", "aria-label": t("Sources") },
    el("strong", { textContent: t("Sources") }),
  );
  // Only what the run actually read (the record's sources), plus the skills applied.
  // A recalled note links to it in the Memory view.
  const read = [
    ...run.sources.map((s) =>
      s.kind === "memory"
        ? el(
            "li",
            {},
            `${kindLabel("memory")} `,
            el("a", {
              href: `#memory/${encodeURIComponent(s.id)}`,
              className: "recalled-note",
              textContent: s.title || s.id,
            }),
          )
        : el("li", { textContent: `${kindLabel(s.kind)} ${s.title || s.id}` }),
    ),
    // A skill applied links to its definition in the Skills view.
    ...run.skills.map((s) =>
      el(
        "li",
        {},
        `${kindLabel("skill")} `,
        el("a", { href: `#skills/${encodeURIComponent(s.skill_id)}`, className: "skill-link", textContent: s.name }),
      ),
    ),
  ];
  panel.append(read.length ? el("ul", {}, ...read) : el("p", { textContent: t("Nothing was read.") }));
  // Explained when the router chose a skill, or asked its arbiter (which may have said none).
  if (run.skills.some((s) => s.invocation === "auto") || run.router_decision?.arbiter_question)
    panel.append(whyThisSkill(run));
  block.extra.querySelector(".sources")?.remove();
  block.extra.prepend(panel);
}
