// The web page's entry: the views (chat, agents, ...) chosen from the
// navigation and the address's #hash, each in its own module under js/.
// Plain ES modules, no build step; every call goes to the gateway's
// /api/agent routes (docs/api.md).

import { $, guard, json } from "./js/core.js";
import { translatePage } from "./js/i18n.js";
import { wireChat } from "./js/chat.js";
import { loadConversations, openConversation } from "./js/conversations.js";
import { loadModels, renderSourceChecks } from "./js/models.js";
import { loadSources } from "./js/sources-popover.js";
import { loadChips } from "./js/suggestions.js";
import { applySettings, wirePersonal } from "./js/personal.js";
import { enterAgents, leaveAgents, wireAgents } from "./js/agents.js";
import { loadProjectContext, stopLiveState, watchLiveState, wireProject } from "./js/project.js";
import { enterInstructions, loadReminder, wireInstructions } from "./js/instructions.js";
import { enterMemory, wireMemory } from "./js/memory.js";
import { enterSkills } from "./js/skills.js";
import { enterHelp, placeHelp } from "./js/help.js";
import { loadProjects, wireProjects } from "./js/projects.js";
import { wireComposer } from "./js/composer.js";

// Each view: what entering it loads, and what leaving it stops.
const VIEWS = {
  chat: {},
  agents: {
    enter: () => {
      watchLiveState();
      return Promise.all([enterAgents(), loadProjectContext()]);
    },
    leave: () => {
      leaveAgents();
      stopLiveState();
    },
  },
  instructions: { enter: enterInstructions },
  // #memory/<note id> opens the view on that note (a run's Sources panel links there).
  memory: { enter: enterMemory },
  // #skills/<skill id> opens a skill's definition (a run's Sources panel links there).
  skills: { enter: enterSkills },
  // #help/<topic> opens the Help view at that topic.
  help: { enter: enterHelp },
};
let current = null;

function showView(hash) {
  const [name, argument] = hash.split("/");
  const view = name in VIEWS ? name : "chat";
  if (current && current !== view) VIEWS[current].leave?.();
  current = view;
  for (const section of document.querySelectorAll("[data-view]")) section.hidden = section.dataset.view !== view;
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.hash === `#${view}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const { enter } = VIEWS[view];
  return enter ? guard(enter)(argument && decodeURIComponent(argument)) : undefined;
}

// Another project chosen: the view shown is drawn anew from that project
// (a note's #memory/<id> is not carried over).
function reenterView() {
  for (const id of [
    "memory-status",
    "note-proposals-status",
    "registry-status",
    "agent-status",
    "live-status",
    "import-result",
    "skills-status",
  ])
    $(id).replaceChildren();
  const { enter, leave } = VIEWS[current] || {};
  leave?.();
  return enter ? guard(enter)() : undefined;
}

translatePage();
placeHelp();
window.addEventListener("hashchange", () => showView(location.hash.slice(1)));
document.addEventListener("project-changed", reenterView);

// Opening the page shows the latest conversation; sending waits for that to
// finish, so a fast first message is never wiped by the history loading.
const opened = (async () => {
  // The chosen project first: every project-scoped view reads it.
  const projectsRead = loadProjects();
  try {
    const settings = await json("/personal-settings");
    applySettings(settings);
    await Promise.all([loadSources(), loadModels(settings), loadChips(), loadReminder()]);
    const list = await loadConversations();
    const last = sessionStorage.getItem("conversation");
    const current = list.find((c) => c.id === last) || list[0];
    if (current) await openConversation(current.id);
    else renderSourceChecks();
  } catch (error) {
    $("alert").textContent = error.message;
    $("alert").hidden = false;
  } finally {
    await projectsRead;
    await showView(location.hash.slice(1));
    document.body.dataset.ready = "true";
  }
})();

wireChat(() => opened);
wirePersonal();
wireAgents();
wireProject();
wireProjects();
wireInstructions();
wireMemory();
wireComposer();
