// The Agents view: the chosen project's registry (register, rename, change the
// model, which may swap the provider), and each agent's one shared thread:
// whole by default and live while runs stream, filtered by pair or by
// correlation (each labelled a partial view), with the rotation seams and
// their handoff summaries, exported as a download and imported back.

import { API, $, el, download, followToEnd, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { renderMarkdown, streamMarkdown } from "./markdown.js";
import { errorCause, localizeHeadings, noticeView } from "./notices.js";
import { sameProject, withProject, withSharedProject } from "./projects.js";

const view = {
  agents: [],
  models: [],
  current: null,
  filter: { kind: "all", value: "" },
  timer: null,
  shown: "",
  live: null,
  me: { user: "", role: "user" },
};
const POLL_MS = 1500;

export async function enterAgents() {
  const current = sameProject();
  const [{ agents }, { models }, me] = await Promise.all([
    json(withSharedProject("/agents?page_size=500")),
    json("/models"),
    json("/me"),
  ]);
  if (!current()) return;
  view.agents = agents;
  view.me = me;
  view.models = models;
  $("agent-model").replaceChildren(...modelOptions());
  $("new-agent-model").replaceChildren(...modelOptions());
  renderRegistry();
  const wanted = sessionStorage.getItem("agent");
  if (wanted && agents.some((a) => a.id === wanted)) await openAgent(wanted);
  else closeAgent();
}

// No agent open (none chosen yet, or the chosen project has not that one).
function closeAgent() {
  view.current = null;
  view.live = null;
  view.shown = "";
  $("agent-detail").hidden = true;
  $("thread").replaceChildren();
  renderRegistry();
}

export function leaveAgents() {
  clearInterval(view.timer);
  view.timer = null;
}

function modelOptions() {
  return view.models.map((m) =>
    el("option", { value: m.id, textContent: m.id === "auto" ? t("Auto") : `${m.label} (${m.provider || "router"})` }),
  );
}

function providerOf(modelId) {
  const model = view.models.find((m) => m.id === modelId);
  return model ? model.provider || "" : "";
}

function renderRegistry() {
  $("agent-list").replaceChildren(
    ...view.agents.map((agent) => {
      const open = el("button", {
        type: "button",
        className: "open-agent",
        textContent: agent.display_name || agent.id,
        "aria-label": t("Open {name}", { name: agent.display_name || agent.id }),
      });
      open.onclick = guard(() => openAgent(agent.id));
      return el(
        "li",
        { dataset: { id: agent.id }, className: agent.id === view.current ? "active" : "" },
        open,
        el("span", { className: "meta", textContent: ` ${agent.id} · ${agent.model || t("Auto")}` }),
      );
    }),
  );
}

async function register(event) {
  event.preventDefault();
  const agent = await json(withProject("/agents"), {
    method: "POST",
    body: JSON.stringify({
      id: $("new-agent-id").value.trim(),
      display_name: $("new-agent-name").value.trim(),
      persona: $("new-agent-persona").value,
      model: $("new-agent-model").value,
    }),
  });
  $("register-form").reset();
  $("registry-status").textContent = t("Agent {id} registered.", agent);
  view.agents = (await json(withSharedProject("/agents?page_size=500"))).agents;
  renderRegistry();
  await openAgent(agent.id);
}

async function openAgent(id) {
  view.current = id;
  sessionStorage.setItem("agent", id);
  const agent = await json(`/agents/${encodeURIComponent(id)}`);
  $("agent-detail").hidden = false;
  $("agent-title").textContent = agent.display_name || agent.id;
  $("agent-name").value = agent.display_name;
  $("agent-model").value = agent.model || "auto";
  $("agent-model").dataset.saved = agent.model || "auto";
  // Changing an agent is for its owner or an admin: others see who to ask
  // instead of a form the API would refuse.
  const mayChange = view.me.role === "admin" || !agent.owner || agent.owner === view.me.user;
  $("agent-form").hidden = !mayChange;
  $("agent-status").textContent = mayChange
    ? ""
    : t("Only its owner ({owner}) or an admin can change this agent.", { owner: agent.owner });
  showSwapWarning();
  renderRegistry();
  clearInterval(view.timer);
  view.timer = null;
  // The first read's refusal (not a member: 403) reaches the page's alert;
  // only a thread the user may read is polled.
  await setFilter("all", "");
  view.timer = setInterval(() => refreshThread().catch(() => {}), POLL_MS);
}

function showSwapWarning() {
  const saved = $("agent-model").dataset.saved;
  const next = $("agent-model").value;
  const swap = providerOf(saved) !== providerOf(next);
  $("swap-warning").hidden = saved === next;
  $("swap-warning").textContent = swap
    ? t(
        "Provider swap: from {old} to {new}. The agent's next run starts from the handoff summary and the recent entries of its thread, not from the old provider's session.",
        { old: providerOf(saved) || t("Auto"), new: providerOf(next) || t("Auto") },
      )
    : t("The model changes; the provider stays the same.");
}

async function saveAgent(event) {
  event.preventDefault();
  const agent = await json(`/agents/${encodeURIComponent(view.current)}`, {
    method: "PATCH",
    body: JSON.stringify({
      display_name: $("agent-name").value.trim(),
      model: $("agent-model").value,
      provider_id: providerOf($("agent-model").value),
    }),
  });
  const swapped = providerOf($("agent-model").dataset.saved) !== providerOf(agent.model);
  $("agent-model").dataset.saved = agent.model;
  $("agent-title").textContent = agent.display_name || agent.id;
  $("agent-status").textContent = swapped
    ? t("Saved. Provider swapped: the next run starts from the handoff summary.")
    : t("Saved.");
  showSwapWarning();
  view.agents = (await json(withSharedProject("/agents?page_size=500"))).agents;
  renderRegistry();
}

// ---- The thread viewer ----

function setFilter(kind, value) {
  view.filter = { kind, value };
  for (const radio of document.querySelectorAll("input[name=thread-filter]")) radio.checked = radio.value === kind;
  $("filter-requester").value = kind === "pair" ? value : $("filter-requester").value;
  $("filter-correlation").value = kind === "correlation" ? value : $("filter-correlation").value;
  view.shown = "";
  if (kind !== "all" && !value) {
    $("view-label").className = "view-label partial";
    $("view-label").textContent =
      kind === "pair" ? t("Type a requester, then press Enter.") : t("Type a correlation id, then press Enter.");
    return undefined;
  }
  return refreshThread();
}

async function refreshThread() {
  if (!view.current || (view.filter.kind !== "all" && !view.filter.value)) return;
  const id = encodeURIComponent(view.current);
  const { kind, value } = view.filter;
  const query =
    kind === "pair"
      ? `&requester=${encodeURIComponent(value)}`
      : kind === "correlation"
        ? `&correlation_id=${encodeURIComponent(value)}`
        : "";
  const [page, { segments }] = await Promise.all([
    json(`/agents/${id}/entries?page_size=500${query}`),
    json(`/agents/${id}/segments`),
  ]);
  // Redrawn only when something changed: polling must not disturb reading.
  const signature = JSON.stringify([
    kind,
    value,
    page.entries.map((e) => e.sequence),
    segments.map((s) => [s.number, s.handoff_state]),
    view.live?.runId,
  ]);
  if (signature === view.shown) return;
  view.shown = signature;
  renderFilterLabel(page.partial_view);
  renderEntries(page.entries, kind === "all" ? segments : []);
}

function renderFilterLabel(partial) {
  const { kind, value } = view.filter;
  const label = $("view-label");
  label.className = kind === "all" ? "view-label" : "view-label partial";
  label.textContent =
    kind === "all"
      ? t("Full thread: every requester's exchanges with {agent}, in order.", { agent: view.current })
      : kind === "pair"
        ? t("Partial view: only {requester}'s exchanges with {agent}. The full thread holds more.", {
            requester: value,
            agent: view.current,
          })
        : t("Partial view: only correlation {id} (one request and its answers). The full thread holds more.", {
            id: value,
          });
  label.dataset.partial = String(kind !== "all" || partial);
}

function renderEntries(entries, segments) {
  const byNumber = new Map(segments.map((s) => [s.number, s]));
  // A seam stands before the first entry of each segment after the first.
  const seamBefore = new Map(
    segments
      .filter((s) => s.number > 1 && s.entry_count > 0)
      .map((s) => [s.first_sequence, byNumber.get(s.number - 1)]),
  );
  const items = [];
  for (const entry of entries) {
    if (seamBefore.has(entry.sequence)) items.push(seam(seamBefore.get(entry.sequence)));
    items.push(entryView(entry));
  }
  // Just rotated, the new segment still empty: the seam closes the list.
  const last = segments[segments.length - 1];
  if (last && last.number > 1 && last.entry_count === 0) items.push(seam(byNumber.get(last.number - 1)));
  // The ask streaming from this page: its question and answer stay shown
  // until the thread holds them.
  const live = view.live;
  if (live && kind() === "all") {
    const has = (role) => live.runId && entries.some((e) => e.run_id === live.runId && e.role === role);
    if (!has("user")) items.push(live.question);
    if (!has("assistant")) items.push(live.answer);
    items.push(live.status);
  }
  if (!items.length)
    items.push(el("p", { className: "empty", textContent: t("No entries yet: ask this agent something below.") }));
  $("thread").replaceChildren(...items);
}

const kind = () => view.filter.kind;

function seam(segment) {
  if (!segment) return null;
  const summary = segment.handoff_summary
    ? el("div", { className: "handoff" })
    : el("p", {
        className: "handoff pending",
        textContent: t("The handoff summary is not ready yet ({state}).", { state: segment.handoff_state }),
      });
  if (segment.handoff_summary) renderMarkdown(summary, localizeHeadings(segment.handoff_summary));
  return el(
    "section",
    {
      className: "seam",
      role: "separator",
      "aria-label": t("Rotation after segment {n}", { n: segment.number }),
      dataset: { segment: String(segment.number) },
    },
    el("strong", {
      textContent: t(
        "Rotation: segment {n} closed ({count} entries). A model now receives this handoff summary in its place:",
        { n: segment.number, count: segment.entry_count },
      ),
    }),
    summary,
  );
}

function entryView(entry) {
  const asks = entry.role === "user";
  const head = el(
    "div",
    { className: "entry-head" },
    el("span", {
      className: "who",
      textContent: asks ? t("{requester} asks {target}", entry) : t("{target} answers {requester}", entry),
    }),
    el("span", {
      className: "meta",
      textContent: ` #${entry.sequence} · ${new Date(entry.create_time).toLocaleString()} · `,
    }),
  );
  const correlation = el("button", {
    type: "button",
    className: "link correlation",
    textContent: entry.correlation_id.slice(0, 8),
    title: entry.correlation_id,
    "aria-label": t("Show only correlation {id}", { id: entry.correlation_id }),
  });
  correlation.onclick = guard(() => setFilter("correlation", entry.correlation_id));
  head.append(correlation);
  const body = el("div", { className: "entry-body" });
  renderMarkdown(body, entry.content);
  return el(
    "article",
    { className: `entry ${entry.role}`, dataset: { sequence: String(entry.sequence), requester: entry.requester } },
    head,
    body,
  );
}

async function ask(event) {
  event.preventDefault();
  const message = $("ask-message").value.trim();
  if (!message) return;
  const requester = $("ask-requester").value.trim() || "user";
  $("ask-message").value = "";
  $("ask-send").disabled = true;
  $("ask-stop").hidden = false;
  const head = (text) => el("div", { className: "entry-head" }, el("span", { className: "who", textContent: text }));
  const answer = el("div", { className: "entry-body" });
  const live = {
    runId: null,
    question: el(
      "article",
      { className: "entry user live" },
      head(t("{requester} asks {target}", { requester, target: view.current })),
      el("div", { className: "entry-body", textContent: message }),
    ),
    answer: el(
      "article",
      { className: "entry assistant live", "aria-live": "polite" },
      head(t("{target} is answering {requester}…", { target: view.current, requester })),
      answer,
    ),
    status: el("p", { className: "notice", hidden: true }),
  };
  view.live = live;
  if (kind() === "all") $("thread").append(live.question, live.answer, live.status);
  $("thread").querySelector(".empty")?.remove();
  const text = streamMarkdown(answer);
  const fail = (message) => {
    live.status.hidden = false;
    live.status.className = "error";
    live.status.textContent = message;
  };
  try {
    await followToEnd(
      () =>
        fetch(`${API}/agents/${encodeURIComponent(view.current)}/asks`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ message, requester, request_id: crypto.randomUUID() }),
        }),
      (event, data) => {
        live.runId = data.run_id;
        if (event === "delta") text.append(data.text);
        else if (event === "notice") $("ask-notices").append(noticeView(data.code, data.message));
        else if (event === "error" && data.code === "CANCELLED")
          $("ask-notices").append(
            el(
              "p",
              { className: "run-status status-cancelled" },
              el("strong", { textContent: t("Cancelled") }),
              ` — ${errorCause(data.code, data.message)}`,
            ),
          );
        else if (event === "error") fail(data.message);
      },
      // The stream kept dropping and the run ended meanwhile: its record says how.
      {
        onError: fail,
        onEnded: (run) => {
          if (run.status !== "done")
            fail(run.error || t("The run ended without an answer ({status}).", { status: run.status }));
        },
      },
    );
  } catch (error) {
    fail(error.message);
  } finally {
    $("ask-send").disabled = false;
    $("ask-stop").hidden = true;
  }
  if (live.status.className === "error") return;
  view.live = null;
  view.shown = "";
  await refreshThread();
}

async function exportThread() {
  const bundle = await json(`/agents/${encodeURIComponent(view.current)}/export`);
  download(`${view.current}-thread.json`, JSON.stringify(bundle, null, 2));
  $("agent-status").textContent = t("Exported {count} files.", { count: bundle.files.length });
}

async function importThread() {
  const file = $("import-thread").files[0];
  if (!file) return;
  let bundle;
  try {
    bundle = JSON.parse(await file.text());
  } catch {
    throw new Error(t("This file is not a thread export (JSON)."));
  }
  const { thread } = await json(withProject("/agents/import"), {
    method: "POST",
    body: JSON.stringify({ files: bundle.files || [] }),
  });
  $("import-thread").value = "";
  $("registry-status").textContent = t("Imported the thread of {agent} ({count} entries).", {
    agent: thread.agent_id,
    count: thread.last_sequence,
  });
  view.agents = (await json(withSharedProject("/agents?page_size=500"))).agents;
  renderRegistry();
  await openAgent(thread.agent_id);
}

// Stops the ask streaming from this page (the run ends cancelled).
async function stopAsk() {
  if (!view.live?.runId) return;
  await json(`/runs/${view.live.runId}/cancel`, { method: "POST", body: "{}" });
}

export function wireAgents() {
  const registryStatus = () => $("registry-status");
  const agentStatus = () => $("agent-status");
  $("register-form").onsubmit = guard(register, registryStatus);
  $("agent-form").onsubmit = guard(saveAgent, agentStatus);
  $("agent-model").onchange = showSwapWarning;
  $("ask-form").onsubmit = guard(ask, agentStatus);
  $("ask-stop").onclick = guard(stopAsk, agentStatus);
  $("export-thread").onclick = guard(exportThread, agentStatus);
  $("import-thread").onchange = guard(importThread, registryStatus);
  for (const radio of document.querySelectorAll("input[name=thread-filter]")) {
    radio.onchange = guard(
      () =>
        setFilter(
          radio.value,
          radio.value === "pair" ? $("filter-requester").value.trim() : $("filter-correlation").value.trim(),
        ),
      agentStatus,
    );
  }
  for (const [input, filter] of [
    ["filter-requester", "pair"],
    ["filter-correlation", "correlation"],
  ]) {
    const apply = guard(() => setFilter(filter, $(input).value.trim()), agentStatus);
    $(input).onchange = apply;
    $(input).onkeydown = (event) => {
      if (event.key === "Enter") apply();
    };
  }
}
