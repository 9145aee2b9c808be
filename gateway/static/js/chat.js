// The chat: conversations (pin, rename, search), a composer with the
// All-sources popover, the model selector and a Stop button, runs streamed
// as SSE (steps, answer as Markdown, model, skill, sources read, router
// decision, how the run ended and why), and instruction proposals.

import { API, $, el, followRun, followToEnd, guard, json } from "./core.js";
import { language, t } from "./i18n.js";
import { streamMarkdown } from "./markdown.js";
import { diffLines } from "./diff.js";
import { branchText, errorCause, invocationText, noticeView } from "./notices.js";
import { helpToggle } from "./help.js";
import { attachContext, clearContext, takeContext, takeForced } from "./composer.js";
import { bodyProjectId } from "./projects.js";

export const state = {
  conversationId: null,
  models: [],
  sources: null,
  allowed: null,
  webConfirmed: false,
  running: null,
};

// ---- Conversations (pinned first, search by title, rename, pin) ----

let listing = 0;

export async function loadConversations() {
  const q = $("search").value.trim();
  const asked = ++listing;
  const { conversations } = await json("/conversations" + (q ? `?q=${encodeURIComponent(q)}` : ""));
  // Answers may come back out of order: only the newest request's is drawn.
  if (asked !== listing) return conversations;
  // A title being renamed stays as the person left it: a refresh that lands
  // meanwhile (after a run, another click) must not take their typing away.
  const input = $("conversations").querySelector(".rename-input");
  const editing = input?.closest("li");
  const focused = document.activeElement === input;
  $("conversations").replaceChildren(
    ...conversations.map((c) => (editing && editing.dataset.id === c.id ? editing : conversationItem(c))),
  );
  if (focused && input.isConnected) input.focus();
  return conversations;
}

function conversationItem(c) {
  const title = c.title || t("New conversation");
  const open = el("button", { type: "button", className: "open", textContent: title });
  open.onclick = guard(() => openConversation(c.id));
  const pinLabel = c.pinned ? t("Unpin") : t("Pin");
  const pin = el("button", {
    type: "button",
    className: "small pin",
    textContent: pinLabel,
    "aria-pressed": String(c.pinned),
    "aria-label": `${pinLabel} ${title}`,
  });
  pin.onclick = guard(async () => {
    await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ pinned: !c.pinned }) });
    await loadConversations();
  });
  const rename = el("button", {
    type: "button",
    className: "small rename",
    textContent: t("Rename"),
    "aria-label": t("Rename {title}", { title }),
  });
  const item = el(
    "li",
    {
      dataset: { id: c.id },
      className: [c.pinned ? "pinned" : "", c.id === state.conversationId ? "active" : ""].join(" ").trim(),
    },
    open,
    pin,
    rename,
  );
  rename.onclick = () => {
    const input = el("input", {
      value: c.title,
      className: "rename-input",
      "aria-label": t("New title"),
      maxLength: 200,
    });
    item.replaceChildren(input);
    input.focus();
    input.select();
    input.onkeydown = guard(async (event) => {
      if (event.key === "Escape") {
        input.remove(); // no longer renaming: the refresh draws the item again
        await loadConversations();
      }
      if (event.key !== "Enter" || !input.value.trim()) return;
      event.preventDefault();
      await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ title: input.value.trim() }) });
      input.remove();
      await loadConversations();
    });
  };
  return item;
}

// Changes a message depends on (opening or creating a conversation, saving
// the sources just ticked) finish before it is sent: sent meanwhile, it would
// go to the previous conversation (its run then wiped from the log as the new
// one is drawn) or be read without those sources.
let settling = Promise.resolve();

function beforeNextMessage(change) {
  settling = Promise.allSettled([settling, change]);
  return change;
}

export function openConversation(id) {
  if (id !== state.conversationId) clearContext(); // it was about the other conversation
  return beforeNextMessage(loadConversation(id));
}

export function newConversation() {
  clearContext();
  return beforeNextMessage(createConversation());
}

// ---- History: opened at its newest messages, older ones read as the log scrolls up ----

// Entries per page (a turn is two or more). The runs' records come newest
// first, a page at a time, read back only as far as the entries shown need.
const ENTRY_PAGE = 200;
const RUN_PAGE = 50;

// The open conversation's history: the token of the page before the oldest
// entry shown, the run records read so far, and the runs that answered.
let history = null;

async function loadConversation(id) {
  state.conversationId = id;
  // A reload reopens this conversation (and its run, if one is going).
  sessionStorage.setItem("conversation", id);
  const [conversation, page, firstRuns] = await Promise.all([
    json(`/conversations/${id}`),
    json(`/conversations/${id}/entries?descending=true&page_size=${ENTRY_PAGE}`),
    json(`/conversations/${id}/runs?page_size=${RUN_PAGE}`),
  ]);
  const opened = {
    id,
    older: page.next_page_token,
    runs: new Map(),
    runsToken: "",
    runsDone: false,
    answered: new Set(),
    loading: null,
    control: null,
    observer: null,
  };
  addRuns(opened, firstRuns);
  const entries = page.entries.reverse();
  await readRuns(opened, entries);
  // Another conversation opened meanwhile: its history is the one shown.
  if (state.conversationId !== id) return;
  state.allowed = conversation.allowed_sources;
  renderSourceChecks();
  history?.observer?.disconnect();
  history = opened;
  opened.control = olderControl(opened);
  const log = $("log");
  log.replaceChildren(opened.control, ...historyItems(opened, entries));
  log.scrollTop = log.scrollHeight;
  watchOlder(opened);
  await loadConversations();
  // Reloading mid-run: the newest run is still going, so attach to its stream.
  const running = firstRuns.runs.find((r) => r.status === "running");
  if (running && state.conversationId === id) {
    const block = runBlock("");
    block.item.dataset.resumed = "true";
    log.append(block.item);
    log.scrollTop = log.scrollHeight;
    // Not awaited: the page is usable (and the run stoppable) while it streams.
    stream(block, () => fetch(`${API}/runs/${running.id}/events`, { headers: { "Last-Event-ID": "0" } }));
  }
}

function addRuns(h, page) {
  for (const run of page.runs) h.runs.set(run.id, run);
  h.runsToken = page.next_page_token;
  h.runsDone = !page.next_page_token;
}

// The records of the runs these entries belong to: older pages of runs
// until each is known, or none is left (an entry's run may have no record).
async function readRuns(h, entries) {
  while (!h.runsDone && entries.some((e) => e.run_id && !h.runs.has(e.run_id))) {
    const token = encodeURIComponent(h.runsToken);
    addRuns(h, await json(`/conversations/${h.id}/runs?page_size=${RUN_PAGE}&page_token=${token}`));
  }
}

// The log's items for entries in order. A run's tool calls and their results
// are entries too; the log shows what the person said and each run's answer.
function historyItems(h, page) {
  const entries = page.filter((e) => e.role === "user" || (e.role === "assistant" && !(e.tool_calls || []).length));
  // An answer comes after its question: in this page, or a newer one shown already.
  for (const entry of entries) if (entry.role !== "user") h.answered.add(entry.run_id);
  const items = [];
  for (const entry of entries) {
    const run = h.runs.get(entry.run_id);
    if (entry.role === "user") {
      items.push(el("div", { className: "msg" }, el("div", { className: "user", textContent: entry.content })));
      // A run that ended without an answer (stopped early, failed) still says how it ended.
      if (run && !h.answered.has(run.id) && run.status !== "running") {
        const block = runBlock("");
        showRunRecord(block, run);
        if (run.status === "waiting_approval" || run.approval) replayProposals(block, run.id);
        items.push(block.item);
      }
      continue;
    }
    const block = runBlock("");
    block.text.set(entry.content);
    if (run) showRunRecord(block, run);
    if (run && (run.status === "waiting_approval" || run.approval)) replayProposals(block, run.id);
    items.push(block.item);
  }
  return items;
}

// At the top of the log while older messages remain: reaching it by
// scrolling up (or pressing it) reads the page before.
function olderControl(h) {
  const button = el("button", { type: "button", className: "load-older", textContent: t("Load older messages") });
  button.onclick = guard(() => loadOlder(h));
  return el("div", { className: "older", hidden: !h.older }, button);
}

function watchOlder(h) {
  if (!h.older || !("IntersectionObserver" in window)) return;
  h.observer = new IntersectionObserver(
    (seen) => {
      if (seen.some((s) => s.isIntersecting)) guard(() => loadOlder(h))();
    },
    { root: $("log") },
  );
  h.observer.observe(h.control);
}

async function loadOlder(h) {
  // Only the history shown reads on (not one left for a new conversation).
  const shown = () => history === h && state.conversationId === h.id;
  if (h.loading || !h.older || !shown()) return h.loading;
  const log = $("log");
  h.loading = (async () => {
    const token = encodeURIComponent(h.older);
    const page = await json(
      `/conversations/${h.id}/entries?descending=true&page_size=${ENTRY_PAGE}&page_token=${token}`,
    );
    const entries = page.entries.reverse();
    await readRuns(h, entries);
    if (!shown()) return;
    h.older = page.next_page_token;
    log.setAttribute("aria-busy", "true");
    // What the person is reading stays where it is: the log grows above it.
    const fromBottom = log.scrollHeight - log.scrollTop;
    h.control.after(...historyItems(h, entries));
    h.control.hidden = !h.older;
    log.scrollTop = log.scrollHeight - fromBottom;
    log.removeAttribute("aria-busy");
  })();
  try {
    await h.loading;
  } finally {
    h.loading = null;
    // Observed anew: a control still in sight (a short page) reads on.
    if (h.older && h.observer) {
      h.observer.unobserve(h.control);
      h.observer.observe(h.control);
    } else h.observer?.disconnect();
  }
  return undefined;
}

async function createConversation() {
  const conversation = await json("/conversations", {
    method: "POST",
    body: JSON.stringify({ allowed_sources: state.allowed || { workspace: true } }),
  });
  state.conversationId = conversation.id;
  sessionStorage.setItem("conversation", conversation.id);
  state.allowed = conversation.allowed_sources;
  $("log").replaceChildren();
  await loadConversations();
}

// ---- Composer: sources popover, model selector, suggested actions ----

function sourceCheckbox(kind, option) {
  const box = el("input", { type: "checkbox", dataset: { kind, name: option.name } });
  box.onchange = guard(() => saveSources(box));
  return el("label", {}, box, " " + (option.title || option.name));
}

export async function loadSources() {
  state.sources = await json("/sources");
  const { connectors, mcp_servers: mcp } = state.sources;
  $("source-connectors").replaceChildren(
    ...(connectors.length ? [el("strong", { textContent: t("Connectors") })] : []),
    ...connectors.map((c) => sourceCheckbox("connector", c)),
  );
  $("source-mcp").replaceChildren(
    ...(mcp.length ? [el("strong", { textContent: t("MCP servers") })] : []),
    ...mcp.map((m) => sourceCheckbox("mcp", m)),
  );
  for (const box of [$("source-workspace"), $("source-memory")]) box.onchange = guard(() => saveSources(box));
}

function selectedModel() {
  return state.models.find((m) => m.id === $("model").value) || { id: "auto", web_only: false };
}

export function renderSourceChecks() {
  const allowed = state.allowed || { workspace: true, connectors: [], mcp_servers: [] };
  const webOnly = selectedModel().web_only;
  for (const box of document.querySelectorAll("#sources-popover input[type=checkbox]")) {
    const { kind, name } = box.dataset;
    const ticked =
      kind === "workspace" || kind === "memory"
        ? allowed[kind] !== false
        : kind === "connector"
          ? (allowed.connectors || []).includes(name)
          : (allowed.mcp_servers || []).includes(name);
    // A web-only model reads neither the workspace, connectors nor memory: shown unticked for its runs.
    box.checked = ticked && !(webOnly && kind !== "mcp");
    box.disabled = webOnly && kind !== "mcp";
  }
  const warning = $("web-warning");
  warning.hidden = !webOnly;
  warning.textContent = webOnly
    ? t("{model} is web-only: your workspace and connectors will not be read for its runs.", {
        model: selectedModel().label,
      })
    : "";
}

// Saves what this box changes, and only that: the conversation keeps the
// rest (memory stays off when a connector is ticked, and boxes a web-only
// model shows unticked are not saved as such).
function saveSources(box) {
  const pick = (kind) =>
    [...document.querySelectorAll(`#sources-popover input[data-kind=${kind}]:checked`)].map((b) => b.dataset.name);
  const { kind } = box.dataset;
  const change =
    kind === "connector"
      ? { connectors: pick("connector") }
      : kind === "mcp"
        ? { mcp_servers: pick("mcp") }
        : { [kind]: box.checked };
  return beforeNextMessage(putSources(change, settling));
}

async function putSources(change, earlier) {
  await earlier; // to the conversation being opened, if one is
  if (!state.conversationId) await newConversation();
  const conversation = await json(`/conversations/${state.conversationId}/sources`, {
    method: "PUT",
    body: JSON.stringify(change),
  });
  state.allowed = conversation.allowed_sources;
}

export function modelLabel(m) {
  return m.label + (m.web_only ? ` (${t("web only")})` : "") + (m.expensive ? ` (${t("expensive")})` : "");
}

export async function loadModels(settings) {
  const { models } = await json("/models");
  state.models = models;
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, textContent: modelLabel(m) })));
  $("model").value = settings.default_model || "auto";
}

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

// ---- A run: streamed events, then its record ----

function runBlock(text) {
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
const ERROR_STATUS = { CANCELLED: "cancelled", BUDGET_EXCEEDED: "budget_exceeded" };

function showEnding(block, status, cause) {
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

function setRunning(block) {
  state.running = block;
  $("stop").hidden = !block;
  $("stop").disabled = !block;
  $("send").disabled = Boolean(block);
}

export async function stopRun() {
  const block = state.running;
  if (!block || !block.runId) return;
  $("stop").disabled = true;
  try {
    await json(`/runs/${block.runId}/cancel`, { method: "POST", body: "{}" });
  } catch (error) {
    $("stop").disabled = false;
    throw error;
  }
}

async function stream(block, request) {
  setRunning(block);
  try {
    await followToEnd(request, (event, data) => onRunEvent(block, event, data), {
      onError: (message) => showEnding(block, "failed", message),
      onEnded: (run) => showRunRecord(block, run),
    });
  } catch (error) {
    showEnding(block, "failed", error.message);
  } finally {
    setRunning(null);
  }
}

// The engine names its steps in English; the page shows them in the
// interface's language (the known labels; an unknown one as it came).
const STEP_PATTERNS = [
  [/^Writing with (.+)$/, "Writing with {model}", ["model"]],
  [/^Reading (.+)'s thread and memory$/, "Reading {agent}'s thread and memory", ["agent"]],
  [/^(.+) answers with (.+)$/, "{agent} answers with {model}", ["agent", "model"]],
];

export function stepLabel(label) {
  for (const [pattern, template, names] of STEP_PATTERNS) {
    const match = pattern.exec(label);
    if (match) return t(template, Object.fromEntries(names.map((name, i) => [name, match[i + 1]])));
  }
  return t(label);
}

function onRunEvent(block, event, data) {
  block.runId = data.run_id;
  block.item.dataset.runId = data.run_id;
  // The language the engine writes this run's notices and errors in.
  if (event === "run_started") block.language = data.language || "en";
  if (event === "step") {
    let li = block.steps.querySelector(`[data-key="${data.key}"]`);
    if (!li) {
      li = el("li", { dataset: { key: data.key } });
      block.steps.append(li);
    }
    li.textContent = stepLabel(data.label);
    li.className = data.status;
  } else if (event === "skill_used") {
    const invocation = invocationText(data.invocation);
    block.steps.append(
      el("li", { className: "completed", textContent: t("Skill: {name} ({invocation})", { ...data, invocation }) }),
    );
  } else if (event === "delta") {
    block.text.append(data.text);
  } else if (event === "notice") {
    block.notices.append(noticeView(data.code, data.message, block.language));
  } else if (event === "proposal") {
    block.extra.append(proposalView(data));
  } else if (event === "final") {
    block.text.set(data.text);
    // A run waiting for approval (a proposal) has used no model.
    block.meta.textContent = data.model ? t("Model: {model}", data) : "";
    showEnding(block, data.status);
    json(`/runs/${data.run_id}`).then(
      (run) => showRunRecord(block, run),
      () => {},
    );
  } else if (event === "error") {
    showEnding(block, ERROR_STATUS[data.code] || "failed", errorCause(data.code, data.message, block.language));
    json(`/runs/${data.run_id}`).then(
      (run) => showRunRecord(block, run),
      () => {},
    );
  }
}

// A run waiting for approval shows its proposals again (from its stored
// events), still to accept or refuse, in the conversation that made them.
function replayProposals(block, runId) {
  followRun(
    () => fetch(`${API}/runs/${runId}/events`, { headers: { "Last-Event-ID": "0" } }),
    (event, data) => {
      if (event === "proposal" && !block.extra.querySelector(`[data-proposal-id="${data.proposal_id}"]`))
        block.extra.append(proposalView(data));
    },
    { onError: (message) => block.notices.append(el("p", { className: "error", textContent: message })) },
  ).catch((error) => block.notices.append(el("p", { className: "error", textContent: error.message })));
}

// "page:" / "page :": a source's kind as the Sources panel heads it.
const kindLabel = (kind) => t("{kind}:", { kind: t(kind) });

function showRunRecord(block, run) {
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

function whyThisSkill(run) {
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

export function proposalView(event) {
  const box = el(
    "section",
    { className: "proposal", "aria-label": t("Instruction proposal"), dataset: { proposalId: event.proposal_id } },
    el("strong", { textContent: t('Proposed change to "{title}"', { title: event.page_title }) }),
    el("p", { textContent: event.summary }),
  );
  const diff = el("div", { className: "diff" });
  const status = el("p", { className: "decision", role: "status" });
  const accept = el("button", { type: "button", className: "accept", textContent: t("Accept") });
  const refuse = el("button", { type: "button", className: "refuse", textContent: t("Refuse") });
  const decide = async (verb) => {
    accept.disabled = refuse.disabled = true;
    try {
      const answer = await json(`/proposals/${event.proposal_id}/${verb}`, { method: "POST", body: "{}" });
      status.textContent =
        verb === "accept"
          ? t('Accepted: "{title}" is now version {version}.', answer.page)
          : t("Refused: nothing was written.");
      box.dataset.state = answer.proposal.state;
    } catch (error) {
      status.textContent = error.message;
      accept.disabled = refuse.disabled = false;
    }
  };
  accept.onclick = () => decide("accept");
  refuse.onclick = () => decide("refuse");
  box.append(diff, accept, refuse, status);
  // The structured diff (hunks of added/removed/context lines) reads better than the raw one.
  json(`/proposals/${event.proposal_id}`).then(
    (proposal) => {
      diff.replaceChildren(...diffLines(proposal.diff));
      if (proposal.state !== "pending") {
        accept.disabled = refuse.disabled = true;
        box.dataset.state = proposal.state;
        status.textContent =
          proposal.state === "accepted"
            ? t("This proposal was accepted.")
            : t("This proposal was refused: nothing was written.");
      }
    },
    () => {
      diff.textContent = event.unified_diff || "";
    },
  );
  return box;
}

async function send(text) {
  const block = runBlock(text);
  $("log").append(block.item);
  const model = $("model").value;
  // The run reads the chosen project's notes, context and live state, and
  // gets what the user is working on as its context.
  const context = takeContext();
  const body = JSON.stringify({
    message: text,
    model,
    forced_skills: takeForced(),
    request_id: crypto.randomUUID(),
    project_id: bodyProjectId(),
    ...(context ? { context } : {}),
    // The run's notices, proposals and title in the interface's language.
    language: language(),
  });
  await stream(block, () =>
    fetch(`${API}/conversations/${state.conversationId}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
    }),
  );
  await loadConversations();
}

export async function submit() {
  await settling;
  const text = $("message").value.trim();
  if (!text || state.running) return;
  // A web-only model: say so before sending, and send only once confirmed.
  if (selectedModel().web_only && !state.webConfirmed) {
    $("web-confirm-text").textContent = t("{model} will not read your workspace, pages or connectors. Send anyway?", {
      model: selectedModel().label,
    });
    $("web-confirm").hidden = false;
    $("web-confirm-send").focus();
    return;
  }
  state.webConfirmed = false;
  $("web-confirm").hidden = true;
  $("message").value = "";
  $("send").disabled = true;
  try {
    if (!state.conversationId) await newConversation();
    await send(text);
  } finally {
    $("send").disabled = false;
  }
}

export function toggleSources() {
  const popover = $("sources-popover");
  popover.hidden = !popover.hidden;
  $("sources-button").setAttribute("aria-expanded", String(!popover.hidden));
}

export function wireChat(opened) {
  let searchTimer = null;
  $("search").oninput = () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(guard(loadConversations), 150);
  };
  $("new").onclick = guard(newConversation);
  $("sources-button").onclick = toggleSources;
  $("sources-popover").onkeydown = (event) => {
    if (event.key === "Escape") {
      toggleSources();
      $("sources-button").focus();
    }
  };
  $("model").onchange = () => {
    state.webConfirmed = false;
    $("web-confirm").hidden = true;
    renderSourceChecks();
  };
  $("web-confirm-send").onclick = guard(() => {
    state.webConfirmed = true;
    return submit();
  });
  $("web-confirm-cancel").onclick = () => {
    $("web-confirm").hidden = true;
    $("message").focus();
  };
  $("composer").onsubmit = guard(async (event) => {
    event.preventDefault();
    await opened();
    await submit();
  });
  $("message").onkeydown = (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
  };
  $("stop").onclick = guard(stopRun);
  // Selecting text in the conversation brings actions on it; a click
  // elsewhere in the conversation takes them away (a click on a chip does not).
  let selected = "";
  let selectionTimer = null;
  document.addEventListener("selectionchange", () => {
    clearTimeout(selectionTimer);
    selectionTimer = setTimeout(() => {
      const selection = document.getSelection();
      const inLog = selection.rangeCount > 0 && $("log").contains(selection.getRangeAt(0).commonAncestorContainer);
      const text = inLog ? selection.toString().trim() : "";
      if (text ? text === selected : !(selected && inLog)) return;
      selected = text;
      const from = inLog ? selection.getRangeAt(0).commonAncestorContainer : null;
      const block = (from?.nodeType === Node.ELEMENT_NODE ? from : from?.parentElement)?.closest(".run");
      guard(() => loadChips(text, block?.dataset.runId || ""))();
    }, 250);
  });
}
