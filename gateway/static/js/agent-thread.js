// The thread viewer of the Agents view: one view (whole, a requester's
// exchanges or one correlation) of an agent's thread, read newest first and
// drawn in order with its rotation seams and handoff summaries, polled while
// the agent is open, older pages loaded as the reader scrolls up.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { localizeHeadings } from "./notices.js";
import { threadView, view } from "./agents-state.js";

const THREAD_PAGE = 500;
// Each poll reads the newest entries; when more than this arrived since, it
// reads on back to those shown, so none is skipped.
const POLL_PAGE = 50;

export function forgetThread() {
  view.thread?.observer?.disconnect();
  view.thread = threadView();
  view.shown = "";
}

export function setFilter(kind, value) {
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

export async function refreshThread() {
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

export const kind = () => view.filter.kind;

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
