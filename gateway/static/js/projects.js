// Projects: the unit of sharing. The switcher in the top bar lists the
// user's projects (the personal one first) and remembers the choice; the
// Memory view, the project context, the live state, the Agents view's list
// and the chat's messages use the chosen one. The members panel lists who is
// in it with their roles: owners add members, change roles and remove them;
// any member leaves a shared project. Instruction pages, personal settings
// and conversations stay personal.

import { $, el, guard, json, showError } from "./core.js";
import { t, tLater } from "./i18n.js";

const STORE = "switchboard.project";
const ROLES = ["viewer", "editor", "owner"];
export const ROLE_LABELS = { viewer: tLater("Viewer"), editor: tLater("Editor"), owner: tLater("Owner") };
const POLICY_LABELS = {
  review: tLater("Review: an agent's unrequested note waits for a member's decision"),
  auto: tLater("Automatic: an agent's notes are saved at once"),
};

const state = {
  // The user's projects, the personal one first; empty when the gateway
  // has no projects (then every request goes without a project).
  list: [],
  current: null,
  me: "",
  members: [],
};

export const currentProject = () => state.current;

// The project's name as people see it: the personal one is "Personal".
export function projectName(project) {
  if (!project) return t("Personal");
  return project.personal ? t("Personal") : project.display_name || project.id;
}

// The chosen project's id for a query ("" when none is known: the gateway's
// default, the personal project).
export const projectId = () => (state.current ? state.current.id : "");

// For a load that awaits the server: whether the project is still the one
// it was made for. A switch while it was in flight starts the load again, so
// a late answer for the previous project must not overwrite the new one's.
export function sameProject() {
  const made = projectId();
  return () => made === projectId();
}

// ``path`` with the chosen project as its project_id query parameter.
export function withProject(path) {
  const id = projectId();
  if (!id) return path;
  return `${path}${path.includes("?") ? "&" : "?"}project_id=${encodeURIComponent(id)}`;
}

// A listing of agents: a shared project's own, or with the personal project
// chosen, every agent the user may see (the registry of personal projects
// and the agents of the user's projects).
export function withSharedProject(path) {
  return state.current && !state.current.personal ? withProject(path) : path;
}

// The project_id of a request body: only a shared project is named; the
// personal one is what a request without a project means.
export const bodyProjectId = () => (state.current && !state.current.personal ? state.current.id : undefined);

// Whether the user's role in the chosen project lets them write its notes,
// context and live state (a viewer only reads). Unknown: let the API decide.
export const mayWrite = () => !state.current || state.current.role !== "viewer";
const isOwner = () => !!state.current && state.current.role === "owner";

async function allPages(path, key) {
  const items = [];
  let token = "";
  for (let page = 0; page < 20; page += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const body = await json(`${path}${sep}page_size=500${token ? `&page_token=${encodeURIComponent(token)}` : ""}`);
    items.push(...(body[key] || []));
    token = body.next_page_token || "";
    if (!token) break;
  }
  return items;
}

function projectLine(project) {
  return t("Project: {name}", { name: projectName(project) });
}

// Every place that names the chosen project (the top bar's role, the
// views' "Project: …" lines), and the write controls a viewer may not use.
function renderCurrent() {
  const project = state.current;
  $("project").value = project ? project.id : "";
  $("project-role").textContent = project ? t(ROLE_LABELS[project.role] || project.role) : "";
  $("project-role").hidden = !project || project.personal;
  for (const line of document.querySelectorAll("[data-project-line]")) line.textContent = projectLine(project);
  const readOnly = !mayWrite();
  for (const node of document.querySelectorAll("[data-needs-write]")) node.hidden = readOnly;
  for (const node of document.querySelectorAll("[data-read-only-hint]")) node.hidden = !readOnly;
}

function renderSwitcher() {
  const options = state.list.length
    ? state.list.map((p) => el("option", { value: p.id, textContent: projectName(p) }))
    : [el("option", { value: "", textContent: t("Personal") })];
  $("project").replaceChildren(...options);
  $("project").disabled = !state.list.length;
  $("project-members").disabled = !state.list.length;
  $("new-project").disabled = !state.list.length;
  renderCurrent();
}

// Reads the user's projects and picks the remembered one (else the
// personal one). Never throws: without projects the page works as before,
// every request in the personal project.
export async function loadProjects({ quiet = false } = {}) {
  try {
    const [projects, me] = await Promise.all([allPages("/projects", "projects"), json("/me")]);
    state.me = me.user || "";
    // The personal project first, whatever order the page came in.
    state.list = [...projects.filter((p) => p.personal), ...projects.filter((p) => !p.personal)];
  } catch (error) {
    state.list = [];
    // A gateway without the projects routes answers 404: no switcher then.
    if (error.status !== 404) showError(error);
  }
  const remembered = localStorage.getItem(STORE) || "";
  const chosen = state.list.find((p) => p.id === remembered);
  state.current = chosen || state.list[0] || null;
  if (remembered && !chosen && state.list.length && !quiet) {
    localStorage.removeItem(STORE);
    $("project-status").textContent = t("You are no longer a member of {project}: your personal project is shown.", {
      project: remembered,
    });
  }
  renderSwitcher();
}

// Makes ``id`` the chosen project, remembered, and has the views reload
// when it is not the one they show (``before``).
function choose(id, before = projectId()) {
  const project = state.list.find((p) => p.id === id);
  if (!project) return;
  state.current = project;
  localStorage.setItem(STORE, project.id);
  renderCurrent();
  if (project.id !== before) document.dispatchEvent(new CustomEvent("project-changed", { detail: project }));
}

// Reads the projects again (a name, a role or a membership changed) and
// chooses ``id``, else the personal project.
async function reloadAndChoose(id) {
  const before = projectId();
  await loadProjects({ quiet: true });
  choose(state.list.some((p) => p.id === id) ? id : state.list[0]?.id, before);
}

// ---- New project ----

function openNewProject() {
  $("new-project-form").reset();
  $("new-project-status").textContent = "";
  $("new-project-dialog").showModal();
  $("new-project-id").focus();
}

async function createProject(event) {
  event.preventDefault();
  const project = await json("/projects", {
    method: "POST",
    body: JSON.stringify({ id: $("new-project-id").value.trim(), display_name: $("new-project-name").value.trim() }),
  });
  $("new-project-dialog").close();
  await reloadAndChoose(project.id);
  $("project-status").textContent = t("Project {name} created: you are its owner.", { name: projectName(project) });
}

// ---- Members ----

async function openMembers() {
  $("members-status").textContent = "";
  $("member-form").reset();
  await loadMembers();
  $("members-dialog").showModal();
}

async function loadMembers() {
  const project = state.current;
  if (!project) return;
  $("members-project").textContent = projectName(project);
  $("members-role").textContent = t("Your role: {role}.", { role: t(ROLE_LABELS[project.role] || project.role) });
  state.members = await allPages(`/projects/${encodeURIComponent(project.id)}/members`, "members");
  renderMembers();
}

function roleSelect(member) {
  const select = el(
    "select",
    { className: "member-role", "aria-label": t("Role of {user}", { user: member.user_id }) },
    ...ROLES.map((role) => el("option", { value: role, textContent: t(ROLE_LABELS[role]) })),
  );
  select.value = member.role;
  select.onchange = guard(
    async () => {
      try {
        await setRole(member.user_id, select.value);
      } finally {
        await loadMembers();
      }
    },
    () => $("members-status"),
  );
  return select;
}

function renderMembers() {
  const project = state.current;
  const owner = isOwner() && !project.personal;
  $("members").replaceChildren(
    ...state.members.map((member) => {
      const you = member.user_id === state.me;
      const item = el(
        "li",
        { className: "member", dataset: { user: member.user_id, role: member.role } },
        el("span", { className: "member-id", textContent: member.user_id }),
        you ? el("span", { className: "meta", textContent: ` (${t("you")})` }) : null,
        " ",
      );
      if (owner) {
        const remove = el("button", {
          type: "button",
          className: "small remove-member",
          textContent: t("Remove"),
          "aria-label": t("Remove {user}", { user: member.user_id }),
        });
        remove.onclick = guard(
          () => removeMember(member.user_id),
          () => $("members-status"),
        );
        item.append(roleSelect(member), " ", remove);
      } else {
        item.append(el("span", { className: "badge", textContent: t(ROLE_LABELS[member.role] || member.role) }));
      }
      return item;
    }),
  );
  // Write controls for owners only; the API still refuses (403) what the
  // role does not allow, and its reason is shown.
  $("member-form").hidden = !owner;
  $("project-settings-form").hidden = !owner;
  if (owner) {
    $("settings-name").value = project.display_name;
    $("settings-policy").replaceChildren(
      ...Object.entries(POLICY_LABELS).map(([value, label]) => el("option", { value, textContent: t(label) })),
    );
    $("settings-policy").value = project.note_policy || "review";
  }
  $("leave-project").hidden = project.personal;
  $("members-personal").hidden = !project.personal;
}

async function setRole(user, role) {
  await json(`/projects/${encodeURIComponent(projectId())}/members/${encodeURIComponent(user)}`, {
    method: "PUT",
    body: JSON.stringify({ role }),
  });
  $("members-status").textContent = t("{user}'s role is now {role}.", { user, role: t(ROLE_LABELS[role] || role) });
  if (user === state.me) await reloadAndChoose(projectId());
}

async function addMember(event) {
  event.preventDefault();
  const user = $("member-user").value.trim();
  const role = $("member-role").value;
  if (state.members.some((m) => m.user_id === user)) {
    await setRole(user, role);
  } else {
    await json(`/projects/${encodeURIComponent(projectId())}/members/${encodeURIComponent(user)}`, {
      method: "PUT",
      body: JSON.stringify({ role }),
    });
    $("members-status").textContent = t("{user} added with the role {role}.", {
      user,
      role: t(ROLE_LABELS[role] || role),
    });
  }
  $("member-form").reset();
  await loadMembers();
}

async function removeMember(user) {
  if (user === state.me) return leaveProject();
  if (!confirm(t("Remove {user} from {project}?", { user, project: projectName(state.current) }))) return undefined;
  await json(`/projects/${encodeURIComponent(projectId())}/members/${encodeURIComponent(user)}`, {
    method: "DELETE",
  });
  $("members-status").textContent = t("{user} was removed.", { user });
  return loadMembers();
}

async function leaveProject() {
  const project = state.current;
  if (
    !confirm(
      t("Leave {project}? You will no longer see its notes, context or agents.", { project: projectName(project) }),
    )
  )
    return;
  await json(`/projects/${encodeURIComponent(project.id)}/members/${encodeURIComponent(state.me)}`, {
    method: "DELETE",
  });
  $("members-dialog").close();
  await reloadAndChoose("");
  $("project-status").textContent = t("You left {project}.", { project: projectName(project) });
}

async function saveSettings(event) {
  event.preventDefault();
  const project = await json(`/projects/${encodeURIComponent(projectId())}`, {
    method: "PATCH",
    body: JSON.stringify({ display_name: $("settings-name").value.trim(), note_policy: $("settings-policy").value }),
  });
  await reloadAndChoose(project.id || projectId());
  $("members-project").textContent = projectName(state.current);
  $("members-status").textContent = t("Project settings saved.");
}

export function wireProjects() {
  $("project").onchange = () => {
    $("project-status").textContent = "";
    choose($("project").value);
  };
  $("new-project").onclick = openNewProject;
  $("new-project-form").onsubmit = guard(createProject, () => $("new-project-status"));
  $("project-members").onclick = guard(openMembers);
  $("member-form").onsubmit = guard(addMember, () => $("members-status"));
  $("project-settings-form").onsubmit = guard(saveSettings, () => $("members-status"));
  $("leave-project").onclick = guard(leaveProject, () => $("members-status"));
  $("cancel-new-project").onclick = () => $("new-project-dialog").close();
  $("close-members").onclick = () => $("members-dialog").close();
}
