// A conversation's history in the log: opened at its newest messages, older
// ones read as the log scrolls up, each answer with its run's record.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { state } from "./chat-state.js";
import { renderSourceChecks } from "./models.js";
import { runBlock, showRunRecord } from "./run-block.js";
import { replayProposals } from "./proposals.js";

// Entries per page (a turn is two or more). The runs' records come newest
// first, a page at a time, read back only as far as the entries shown need.
const ENTRY_PAGE = 200;
const RUN_PAGE = 50;

// The open conversation's history: the token of the page before the oldest
// entry shown, the run records read so far, and the runs that answered.
let history = null;

// Draws conversation `id`'s newest messages in the log. Returns the run still
// going in it, if any ({ running }), or null when another conversation was
// opened meanwhile (its history is the one shown).
export async function loadHistory(id) {
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
  if (state.conversationId !== id) return null;
  state.allowed = conversation.allowed_sources;
  renderSourceChecks();
  history?.observer?.disconnect();
  history = opened;
  opened.control = olderControl(opened);
  const log = $("log");
  log.replaceChildren(opened.control, ...historyItems(opened, entries));
  log.scrollTop = log.scrollHeight;
  watchOlder(opened);
  return { running: firstRuns.runs.find((r) => r.status === "running") };
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
