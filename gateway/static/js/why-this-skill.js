// Why the router applied a skill, or none: its scores against the thresholds,
// the arbiter's question and answer when it was asked, and for each skill
// applied automatically a way to say it was not relevant (and, offered once
// it keeps missing, to stop its automatic use).

import { el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { branchText } from "./notices.js";
import { helpToggle } from "./help.js";

export function whyThisSkill(run) {
  const decision = run.router_decision || {};
  const rows = (decision.candidates || []).map((c) =>
    el("li", {
      textContent: t("{name}: fused {fused}, lexical {lexical}, embedding {embedding}", {
        name: c.name,
        fused: c.fused_score ?? 0,
        lexical: c.lexical_score ?? 0,
        embedding: c.embedding_score ?? 0,
      }),
    }),
  );
  const auto = run.skills.some((s) => s.invocation === "auto");
  const details = el(
    "details",
    { className: "why" },
    el("summary", { textContent: auto ? t("Why this skill?") : t("Why no skill?") }),
    helpToggle("skills"),
    el("p", {
      className: "branch",
      textContent: t("Decision: {branch} (high {high}, low {low})", {
        branch: branchText(decision.branch),
        high: decision.high_threshold ?? "-",
        low: decision.low_threshold ?? "-",
      }),
    }),
    el("ul", {}, ...rows),
    arbiterView(decision),
  );
  for (const skill of run.skills.filter((s) => s.invocation === "auto")) {
    const button = el("button", {
      type: "button",
      className: "not-relevant",
      textContent: t("This skill was not relevant ({name})", skill),
    });
    const status = el("p", { role: "status" });
    button.onclick = guard(
      async () => {
        button.disabled = true;
        const answer = await json(`/runs/${run.id}/feedback`, {
          method: "POST",
          body: JSON.stringify({ skill_id: skill.skill_id }),
        });
        status.textContent = t("Noted: {name} was not relevant here.", skill);
        if (answer.offer_disable_auto_use) {
          const off = el("button", {
            type: "button",
            className: "disable-auto",
            textContent: t("Stop using {name} automatically", skill),
          });
          off.onclick = guard(async () => {
            const { body } = answer.disable_auto_use;
            await json(`/skills/${skill.skill_id}/enablement`, { method: "PUT", body: JSON.stringify(body) });
            status.textContent = t("{name} is no longer used automatically.", skill);
            off.remove();
          }, status);
          status.after(off);
        }
      },
      () => status,
    );
    details.append(button, status);
  }
  return details;
}

// The grey zone's arbiter, when a model was asked: that it was, the closed
// question it received (as sent), its raw answer and its short reason.
function arbiterView(decision) {
  if (!decision.arbiter_question) return null;
  const answered = !decision.arbiter_error;
  return el(
    "section",
    { className: "arbiter", "aria-label": t("Arbiter") },
    el("p", {
      className: "arbiter-asked",
      textContent: answered
        ? t("The scores fell in the grey zone: the arbiter {arbiter} decided.", decision)
        : t("The scores fell in the grey zone: the arbiter was asked but gave no answer; the scores decided."),
    }),
    decision.arbiter_justification
      ? el("p", {
          className: "arbiter-reason",
          textContent: t("Its reason: {reason}", { reason: decision.arbiter_justification }),
        })
      : null,
    el("p", { textContent: t("Question asked:") }),
    el("pre", { className: "arbiter-instructions", textContent: decision.arbiter_instructions || "" }),
    el("pre", { className: "arbiter-question", textContent: decision.arbiter_question }),
    answered ? el("p", { textContent: t("Its raw answer:") }) : null,
    answered ? el("pre", { className: "arbiter-answer", textContent: decision.arbiter_answer || "" }) : null,
  );
}
