// Skills: the workspace's skill catalog, and one skill's definition (its
// description, the instructions a run applies, whether it is built in and
// whether it is used automatically for the reader). A run's Sources panel
// links each skill it applied here (#skills/<id>).

import { $, el, json } from "./core.js";
import { t } from "./i18n.js";

export async function enterSkills(skillId) {
  $("skills-status").textContent = "";
  const { skills } = await json("/skills?page_size=500");
  $("skill-list").replaceChildren(
    ...skills.map((s) =>
      el(
        "li",
        { dataset: { id: s.id }, className: s.id === skillId || s.name === skillId ? "current" : "" },
        el("a", { href: `#skills/${encodeURIComponent(s.id)}`, textContent: s.name }),
      ),
    ),
  );
  const definition = $("skill-definition");
  if (!skillId) {
    definition.replaceChildren(
      el("p", { className: "hint", textContent: t("Choose a skill to read its definition.") }),
    );
    return;
  }
  let skill;
  try {
    skill = await json(`/skills/${encodeURIComponent(skillId)}`);
  } catch (error) {
    if (error.status !== 404) throw error;
    definition.replaceChildren();
    $("skills-status").textContent = t("That skill no longer exists.");
    return;
  }
  const facts = [
    skill.builtin ? t("Built in: applied only when you ask for it (/{name}).", skill) : null,
    !skill.builtin && skill.enabled && skill.effective_auto_use
      ? t("Used automatically for you when a request matches its description.")
      : null,
    !skill.builtin && !(skill.enabled && skill.effective_auto_use)
      ? t("Not used automatically for you: ask for it with /{name}.", skill)
      : null,
  ].filter(Boolean);
  definition.replaceChildren(
    el("h2", { id: "skill-name", tabIndex: -1, textContent: skill.name }),
    ...facts.map((text) => el("p", { className: "meta", textContent: text })),
    el("h3", { textContent: t("Description") }),
    el("p", { className: "skill-description", textContent: skill.description || t("No description.") }),
    el("h3", { textContent: t("Instructions") }),
    el("pre", { className: "skill-body", textContent: skill.body }),
  );
  $("skill-name").focus();
}
