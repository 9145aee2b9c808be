// What every agent of the chosen project shares: the live state (who is
// doing what, now), watched over SSE with each entry's expiry counting
// down, and the project context, edited here or imported from a project
// folder's .ideai files.

import { API, $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { sameProject, withProject } from "./projects.js";

const live = { entries: new Map(), source: null, ticker: null };

export function watchLiveState() {
  if (live.source) return;
  // EventSource reconnects by itself; each connection starts with a snapshot.
  live.entries = new Map();
  live.source = new EventSource(API + withProject("/live-state/events"));
  live.source.addEventListener("snapshot", (event) => {
    live.entries = new Map(JSON.parse(event.data).entries.map((e) => [e.agent_id, e]));
    $("live-status").textContent = "";
    renderLive();
  });
  live.source.addEventListener("set", (event) => {
    for (const entry of JSON.parse(event.data).entries) live.entries.set(entry.agent_id, entry);
    renderLive();
  });
  live.source.addEventListener("removed", (event) => {
    const data = JSON.parse(event.data);
    for (const entry of data.entries) live.entries.delete(entry.agent_id);
    $("live-status").textContent = data.entries
      .map((e) =>
        data.removal === "expired"
          ? t("{agent}'s state expired.", { agent: e.agent_id })
          : t("{agent}'s state was cleared.", { agent: e.agent_id }),
      )
      .join(" ");
    renderLive();
  });
  live.source.onerror = () => {
    $("live-status").textContent = t("Live state: reconnecting…");
  };
  live.ticker = setInterval(renderLive, 1000);
}

export function stopLiveState() {
  live.source?.close();
  live.source = null;
  clearInterval(live.ticker);
}

function remaining(expire) {
  const seconds = Math.max(0, Math.round((new Date(expire) - Date.now()) / 1000));
  if (seconds >= 3600)
    return t("expires in {h} h {m} min", { h: Math.floor(seconds / 3600), m: Math.floor((seconds % 3600) / 60) });
  if (seconds >= 60) return t("expires in {m} min {s} s", { m: Math.floor(seconds / 60), s: seconds % 60 });
  return t("expires in {s} s", { s: seconds });
}

function renderLive() {
  const rows = [...live.entries.values()].sort((a, b) => a.agent_id.localeCompare(b.agent_id));
  $("live-state").replaceChildren(
    ...(rows.length
      ? rows.map((e) =>
          el(
            "li",
            { dataset: { agent: e.agent_id } },
            el("strong", { textContent: e.agent_id }),
            ` ${e.activity}`,
            e.detail ? el("span", { className: "meta", textContent: ` — ${e.detail}` }) : null,
            el("span", {
              className: "expiry",
              title: new Date(e.expire_time).toLocaleString(),
              textContent: ` · ${remaining(e.expire_time)}`,
            }),
          ),
        )
      : [el("li", { className: "empty", textContent: t("Nobody is working on anything right now.") })]),
  );
}

export async function loadProjectContext() {
  const current = sameProject();
  let context = { body: "", update_time: "" };
  try {
    context = await json(withProject("/project-context"));
  } catch (error) {
    if (error.status !== 404) throw error; // 404: none written yet
  }
  if (!current()) return;
  $("project-context").value = context.body;
  $("context-status").textContent = context.update_time
    ? t("Last saved {time}.", { time: new Date(context.update_time).toLocaleString() })
    : t("No project context yet.");
}

async function saveProjectContext(event) {
  event.preventDefault();
  const context = await json(withProject("/project-context"), {
    method: "PUT",
    body: JSON.stringify({ body: $("project-context").value }),
  });
  $("context-status").textContent = t("Saved: every agent's next run reads this context ({time}).", {
    time: new Date(context.update_time).toLocaleString(),
  });
}

async function importFolder() {
  // Only .ideai/CONTEXT.md and .ideai/memory/*.md are read; paths relative to the chosen folder.
  const wanted = [...$("import-folder").files]
    .map((file) => ({ file, path: file.webkitRelativePath.split("/").slice(1).join("/") || file.name }))
    .filter(({ path }) => /^\.ideai\/(CONTEXT\.md|memory\/[^/]+\.md)$/.test(path));
  if (!wanted.length) throw new Error(t("No .ideai/CONTEXT.md or .ideai/memory/*.md in this folder."));
  const files = await Promise.all(wanted.map(async ({ file, path }) => ({ path, content: await file.text() })));
  const { items } = await json(withProject("/project-context/import"), {
    method: "POST",
    body: JSON.stringify({ files }),
  });
  $("import-folder").value = "";
  $("import-result").replaceChildren(
    ...items.map((item) =>
      el("li", { textContent: `${item.path}: ${t(item.outcome)}${item.reason ? ` (${item.reason})` : ""}` }),
    ),
  );
  await loadProjectContext();
}

export function wireProject() {
  const status = () => $("context-status");
  $("context-form").onsubmit = guard(saveProjectContext, status);
  $("import-folder").onchange = guard(importFolder, status);
}
