// The Agents view: the chosen project's registry (register, rename, pin a
// provider, change the model, which may swap the provider, and choose how a
// command-line provider receives the agent's context), and each agent's one shared thread:
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
  // The signature of what the thread viewer draws, and what it holds.
  shown: "",
  thread: threadView(),
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
  $("agent-provider").replaceChildren(...providerOptions());
  renderRegistry();
  const wanted = sessionStorage.getItem("agent");
  if (wanted && agents.some((a) => a.id === wanted)) await openAgent(wanted);
  else closeAgent();
}

// No agent open (none chosen yet, or the chosen project has not that one).
function closeAgent() {
  view.current = null;
  view.live = null;
  forgetThread();
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

// The providers of the configured models, in their order; "" pins none.
function providerOptions(pinned = "") {
  const providers = [...new Set([...view.models.map((m) => m.provider), pinned].filter(Boolean))];
  return [
    el("option", { value: "", textContent: t("None: the model decides") }),
    ...providers.map((p) => el("option", { value: p, textContent: p })),
  ];
}

// The provider an agent's runs go to: its pin, else its model's ("" for
// Auto unpinned, which may choose any).
function providerIn(form) {
  return form.provider || providerOf(form.model);
}

function agentForm() {
  return { provider: $("agent-provider").value, model: $("agent-model").value };
}

function savedForm() {
  return { provider: $("agent-provider").dataset.saved, model: $("agent-model").dataset.saved };
}

// A pinned agent runs only on its provider's models: choosing a model pins
// its provider, and pinning another provider puts a model of the old one back to Auto.
function modelChosen() {
  const provider = providerOf($("agent-model").value);
  if (provider) $("agent-provider").value = provider;
  showSwapWarning();
}

function providerChosen() {
  const provider = $("agent-provider").value;
  const modelProvider = providerOf($("agent-model").value);
  if (provider && modelProvider && modelProvider !== provider) $("agent-model").value = "auto";
  showSwapWarning();
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
        el("span", {
          className: "meta",
          textContent: ` ${agent.id} · ${[agent.provider_id, agent.model || t("Auto")].filter(Boolean).join(" / ")}`,
        }),
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
  // A pin no configured model serves any more is still shown as it is.
  $("agent-provider").replaceChildren(...providerOptions(agent.provider_id));
  $("agent-provider").value = agent.provider_id;
  $("agent-provider").dataset.saved = agent.provider_id;
  $("agent-injection").value = agent.injection_strategy;
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
  forgetThread(); // opened at its newest entries
  await setFilter("all", "");
  view.timer = setInterval(() => refreshThread().catch(() => {}), POLL_MS);
}

function showSwapWarning() {
  const saved = savedForm();
  const next = agentForm();
  const swap = providerIn(saved) !== providerIn(next);
  $("swap-warning").hidden = saved.model === next.model && saved.provider === next.provider;
  $("swap-warning").textContent = swap
    ? t(
        "Provider swap: from {old} to {new}. The agent's next run starts from the handoff summary and the recent entries of its thread, not from the old provider's session.",
        { old: providerIn(saved) || t("Auto"), new: providerIn(next) || t("Auto") },
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
      provider_id: $("agent-provider").value,
      injection_strategy: $("agent-injection").value,
    }),
  });
  const swapped = providerIn(savedForm()) !== providerIn({ provider: agent.provider_id, model: agent.model });
  $("agent-model").dataset.saved = agent.model;
  $("agent-provider").dataset.saved = agent.provider_id;
  $("agent-title").textContent = agent.display_name || agent.id;
  $("agent-status").textContent = swapped
    ? t("Saved. Provider swapped: the next run starts from the handoff summary.")
    : t("Saved.");
  showSwapWarning();
  view.agents = (await json(withSharedProject("/agents?page_size=500"))).agents;
  renderRegistry();
}

// ---- The thread viewer ----

// Entries per page: a thread opens at its newest entries, and older pages are
// read as it is scrolled up, back to its first entry.
const THREAD_PAGE = 500;
// Each poll reads the newest entries; when more than this arrived since, it
// reads on back to those shown, so none is skipped.
const POLL_PAGE = 50;

// What the viewer shows of one view (agent and filter) of the thread: its
// entries in order, the token of the page before the oldest shown, and each
// entry's and seam's drawing (entries never change, so a redraw reuses them).
function threadView(agent = "", filter = { kind: "all", value: "" }) {
  return {
    key: JSON.stringify([agent, filter.kind, filter.value]),
    agent,
    filter,
    threadId: null,
    entries: [],
    older: "",
    segments: [],
    partial: false,
    nodes: new Map(),
    seams: new Map(),
    empty: null,
    loading: null,
    control: null,
    observer: null,
  };
}

function forgetThread() {
  view.thread?.observer?.disconnect();
  view.thread = threadView();
  view.shown = "";
}

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

// A page of the view, newest first; `token` reads on towards its start.
function readEntries(shown, size, token = "") {
  const { kind, value } = shown.filter;
  const query = new URLSearchParams({ descending: "true", page_size: String(size) });
  if (kind === "pair") query.set("requester", value);
  if (kind === "correlation") query.set("correlation_id", value);
  if (token) query.set("page_token", token);
  return json(`/agents/${encodeURIComponent(shown.agent)}/entries?${query}`);
}

// Every segment (one per rotation, so few): the seams of whatever part is shown.
async function readSegments(agent) {
  const segments = [];
  let token = "";
  do {
    const query = new URLSearchParams({ page_size: "500" });
    if (token) query.set("page_token", token);
    const page = await json(`/agents/${encodeURIComponent(agent)}/segments?${query}`);
    segments.push(...page.segments);
    token = page.next_page_token;
  } while (token);
  return segments;
}

async function refreshThread() {
  if (!view.current || (view.filter.kind !== "all" && !view.filter.value)) return;
  const wanted = threadView(view.current, view.filter);
  const known = view.thread.key === wanted.key && view.thread.entries.length ? view.thread : null;
  const last = known ? known.entries[known.entries.length - 1].sequence : 0;
  const reading = known || wanted;
  const [pages, segments] = await Promise.all([
    (async () => {
      const read = [await readEntries(reading, known ? POLL_PAGE : THREAD_PAGE)];
      for (;;) {
        const page = read[read.length - 1];
        const overlaps = page.entries.some((e) => e.sequence <= last);
        if (!known || page.thread_id !== known.threadId || !page.next_page_token || overlaps) return read;
        read.push(await readEntries(reading, THREAD_PAGE, page.next_page_token));
      }
    })(),
    readSegments(view.current),
  ]);
  // The agent or the filter changed while this read: that view draws itself.
  if (wanted.key !== threadView(view.current, view.filter).key) return;
  const [first] = pages;
  let shown = view.thread;
  let anchor = "kept";
  if (!known || first.thread_id !== known.threadId) {
    view.thread.observer?.disconnect();
    shown = view.thread = wanted;
    shown.threadId = first.thread_id;
    shown.entries = first.entries.reverse();
    shown.older = first.next_page_token;
    anchor = "end";
  } else {
    const fresh = pages.flatMap((p) => p.entries).filter((e) => e.sequence > last);
    shown.entries.push(...fresh.reverse());
  }
  shown.segments = segments;
  shown.partial = first.partial_view;
  drawThread(shown, anchor);
}

// Redrawn only when something changed: polling must not disturb reading.
// `anchor`: "end" shows the newest entries (a view just opened), "older"
// keeps what is read in place as older entries come above it, "kept" keeps
// the position (following the end when it was there).
function drawThread(shown, anchor) {
  const signature = JSON.stringify([
    shown.key,
    shown.threadId,
    shown.entries.length,
    shown.entries.length ? shown.entries[0].sequence : 0,
    shown.entries.length ? shown.entries[shown.entries.length - 1].sequence : 0,
    shown.segments.map((s) => [s.number, s.handoff_state]),
    view.live?.runId,
  ]);
  if (signature === view.shown) return;
  view.shown = signature;
  renderFilterLabel(shown.partial);
  const box = $("thread");
  const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 8;
  const fromBottom = box.scrollHeight - box.scrollTop;
  const top = box.scrollTop;
  renderEntries(shown);
  if (anchor === "older") box.scrollTop = box.scrollHeight - fromBottom;
  else if (anchor === "end" || atEnd) box.scrollTop = box.scrollHeight;
  else box.scrollTop = top;
  if (anchor === "end") {
    // The page itself scrolls as far as needed to show the newest entry.
    box.lastElementChild?.scrollIntoView({ block: "nearest" });
    watchOlder(shown);
  }
}

// At the top of the thread while older entries remain: reaching it by
// scrolling up (or pressing it) reads the page before.
function olderControl(shown) {
  if (!shown.control) {
    const button = el("button", { type: "button", className: "load-older", textContent: t("Load older entries") });
    button.onclick = guard(() => loadOlder(shown), $("agent-status"));
    shown.control = el("div", { className: "older" }, button);
  }
  return shown.control;
}

function watchOlder(shown) {
  if (!shown.older || !("IntersectionObserver" in window)) return;
  shown.observer = new IntersectionObserver(
    (seen) => {
      if (seen.some((s) => s.isIntersecting)) guard(() => loadOlder(shown), $("agent-status"))();
    },
    { root: $("thread") },
  );
  shown.observer.observe(shown.control);
}

async function loadOlder(shown) {
  if (shown.loading || !shown.older || view.thread !== shown) return shown.loading;
  shown.loading = (async () => {
    const page = await readEntries(shown, THREAD_PAGE, shown.older);
    if (view.thread !== shown) return;
    shown.older = page.next_page_token;
    const oldest = shown.entries.length ? shown.entries[0].sequence : Infinity;
    shown.entries.unshift(...page.entries.filter((e) => e.sequence < oldest).reverse());
    drawThread(shown, "older");
  })();
  try {
    await shown.loading;
  } finally {
    shown.loading = null;
    // Observed anew: a control still in sight (a short page) reads on.
    if (shown.older && shown.observer) {
      shown.observer.unobserve(shown.control);
      shown.observer.observe(shown.control);
    } else shown.observer?.disconnect();
  }
  return undefined;
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

function renderEntries(shown) {
  const { entries } = shown;
  const segments = shown.filter.kind === "all" ? shown.segments : [];
  const byNumber = new Map(segments.map((s) => [s.number, s]));
  // A seam stands before the first entry of each segment after the first.
  const seamBefore = new Map(
    segments
      .filter((s) => s.number > 1 && s.entry_count > 0)
      .map((s) => [s.first_sequence, byNumber.get(s.number - 1)]),
  );
  const items = [];
  for (const entry of entries) {
    if (seamBefore.has(entry.sequence)) items.push(seamOf(shown, seamBefore.get(entry.sequence)));
    if (!shown.nodes.has(entry.sequence)) shown.nodes.set(entry.sequence, entryView(entry));
    items.push(shown.nodes.get(entry.sequence));
  }
  // Just rotated, the new segment still empty: the seam closes the list.
  const last = segments[segments.length - 1];
  if (last && last.number > 1 && last.entry_count === 0) items.push(seamOf(shown, byNumber.get(last.number - 1)));
  // The ask streaming from this page: its question and answer stay shown
  // until the thread holds them.
  const live = view.live;
  if (live && kind() === "all") {
    const has = (role) => live.runId && entries.some((e) => e.run_id === live.runId && e.role === role);
    if (!has("user")) items.push(live.question);
    if (!has("assistant")) items.push(live.answer);
    items.push(live.status);
  }
  const drawn = items.filter(Boolean);
  if (!drawn.length) {
    shown.empty ||= el("p", { className: "empty", textContent: t("No entries yet: ask this agent something below.") });
    drawn.push(shown.empty);
  }
  // The control stands first only while older entries remain.
  if (shown.older) drawn.unshift(olderControl(shown));
  replaceChanged($("thread"), drawn);
}

// Puts `items` in `box`, touching only what differs from its children (in a
// long thread, the page read above or the entries added below): redrawing
// thousands of entries would stall the page.
function replaceChanged(box, items) {
  const now = [...box.children];
  let start = 0;
  while (start < now.length && start < items.length && now[start] === items[start]) start += 1;
  let end = 0;
  while (
    end < now.length - start &&
    end < items.length - start &&
    now[now.length - 1 - end] === items[items.length - 1 - end]
  )
    end += 1;
  for (const node of now.slice(start, now.length - end)) node.remove();
  const middle = items.slice(start, items.length - end);
  if (!middle.length) return;
  if (end) now[now.length - end].before(...middle);
  else box.append(...middle);
}

// A seam's drawing, kept while its segment's handoff stays the same.
function seamOf(shown, segment) {
  if (!segment) return null;
  const key = JSON.stringify([segment.number, segment.handoff_state, segment.handoff_summary, segment.entry_count]);
  if (!shown.seams.has(key)) shown.seams.set(key, seam(segment));
  return shown.seams.get(key);
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
  $("thread").scrollTop = $("thread").scrollHeight; // the question just asked, at the thread's end
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
        // The language the engine writes this run's notices in (the question's).
        if (event === "run_started") live.language = data.language;
        if (event === "delta") text.append(data.text);
        else if (event === "notice") $("ask-notices").append(noticeView(data.code, data.message, live.language));
        else if (event === "error" && data.code === "CANCELLED")
          $("ask-notices").append(
            el(
              "p",
              { className: "run-status status-cancelled" },
              el("strong", { textContent: t("Cancelled") }),
              ` — ${errorCause(data.code, data.message, live.language)}`,
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
  $("agent-model").onchange = modelChosen;
  $("agent-provider").onchange = providerChosen;
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
