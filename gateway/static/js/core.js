// What every view shares: DOM helpers, the JSON API client (errors thrown
// with the gateway's message), and run streams read as SSE with resumption.

import { t } from "./i18n.js";
import { refusalMessage } from "./refusals.js";

// The API base comes from the page (a module script runs once <body> is parsed).
export const API = document.body.dataset.api;
export const $ = (id) => document.getElementById(id);

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key in node) node[key] = value;
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

export async function json(path, options = {}) {
  let response;
  try {
    response = await fetch(API + path, { headers: { "Content-Type": "application/json" }, ...options });
  } catch {
    throw new Error(t("The server cannot be reached. Check your connection and try again."));
  }
  const text = response.status === 204 ? "" : await response.text();
  let body = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = {};
  }
  if (!response.ok) {
    const error = new Error(refusalMessage(response, body));
    error.status = response.status;
    error.reason = body.error ? body.error.reason : "";
    throw error;
  }
  return body;
}

// The API's refusal as the reader sees it. A 403 is a matter of role or
// membership: a sentence in the reader's language says which, then the
// API's own reason (what was refused, who can allow it).
// Every action's failure is shown: in the view's own status line when there
// is one, else in the page-wide alert.
export function showError(error, target = $("alert")) {
  target.textContent = error.message || String(error);
  target.hidden = false;
}

export function guard(action, target) {
  return async (...args) => {
    try {
      return await action(...args);
    } catch (error) {
      showError(error, typeof target === "function" ? target() : target || $("alert"));
      return undefined;
    }
  };
}

export function parseSse(buffer, onEvent) {
  // Splits the buffer into complete SSE events; returns the unparsed rest.
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    let event = "message";
    let data = "";
    let id = null;
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data += line.slice(5).trim();
      else if (line.startsWith("id:")) id = line.slice(3).trim();
    }
    if (data) onEvent(event, JSON.parse(data), id);
  }
  return rest;
}

const TERMINAL = new Set(["final", "error"]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Reads a run's stream to its end. A connection dropped before the terminal
// event is reopened on /runs/{id}/events with the last id seen as
// Last-Event-ID, so no event is lost or shown twice. It gives up after
// `attempts` reopenings in a row that bring no new event (one that does
// starts the count again). Returns { ended, runId, lastId }: ended once the
// terminal event came or `onError` was told; otherwise the caller decides
// (runId and lastId say where to follow from). `runId` and `lastId` given
// continue a run already followed.
export async function followRun(request, onEvent, { onError, attempts = 5, runId = null, lastId = "0" } = {}) {
  let ended = false;
  let next = request;
  let failures = 0;
  const reopen = () => {
    const resumeFrom = lastId;
    next = () => fetch(`${API}/runs/${runId}/events`, { headers: { "Last-Event-ID": resumeFrom } });
  };
  while (!ended && failures <= attempts) {
    const seen = lastId;
    let response;
    try {
      response = await next();
    } catch {
      if (!runId) throw new Error(t("The server cannot be reached. Check your connection and try again."));
      failures += 1;
      await sleep(300 * failures);
      continue;
    }
    if (response.status === 204) break;
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      onError(refusalMessage(response, body));
      return { ended: true, runId, lastId };
    }
    try {
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = parseSse(buffer + value, (event, data, id) => {
          // An error without an id is the gateway giving up on the stream
          // ("stream interrupted"), not a stored event: the run may go on, so
          // it is reopened like a dropped connection.
          if (event === "error" && id === null) return;
          if (id !== null) lastId = id;
          if (data.run_id) runId = data.run_id;
          if (TERMINAL.has(event)) ended = true;
          onEvent(event, data);
        });
      }
    } catch {
      // The connection dropped mid-stream: reopened below.
    }
    if (ended || !runId) break;
    failures = lastId === seen ? failures + 1 : 0;
    reopen();
    if (failures > 0) await sleep(300 * failures);
  }
  return { ended, runId, lastId };
}

// How long to wait before following a run again whose stream kept dropping.
const REFOLLOW_MS = 3000;

// Follows a run to its end however often its stream drops: while the run's
// record says it goes on, it is followed again from the last event seen
// (Stop still works meanwhile); once it has ended, its stored events are read
// to the end, and if even that fails `onEnded(run)` gets the record to say
// how it ended. Never returns without the run's ending told to one of them.
export async function followToEnd(request, onEvent, { onError, onEnded }) {
  let followed = await followRun(request, onEvent, { onError });
  while (!followed.ended) {
    const { runId, lastId } = followed;
    if (!runId) throw new Error(t("The server closed the stream before the run started."));
    const run = await json(`/runs/${runId}`);
    if (run.status === "running") await sleep(REFOLLOW_MS);
    const again = () => fetch(`${API}/runs/${runId}/events`, { headers: { "Last-Event-ID": lastId } });
    followed = await followRun(again, onEvent, { onError, runId, lastId });
    if (!followed.ended && run.status !== "running") {
      onEnded(run);
      return;
    }
  }
}

export function download(name, text, type = "application/json") {
  const link = el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
