// A run's stream as the page reads it: SSE split into events, and a run
// followed to its end across dropped connections, resumed from the last
// event seen so none is lost or shown twice.
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { installPage, page } from "./page.mjs";

installPage({ api: "/api/agent" });
const { followRun, followToEnd, parseSse } = await import(page("js/core.js"));

// The waits between reopenings (0.3 s and up) pass at once here.
const setTimeoutAsIs = globalThis.setTimeout;
beforeEach(() => {
  installPage({ api: "/api/agent" });
  globalThis.setTimeout = (action) => setTimeoutAsIs(action, 0);
});
afterEach(() => {
  globalThis.setTimeout = setTimeoutAsIs;
});

const sse = (events) =>
  events
    .map(([id, event, data]) => `${id === null ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
    .join("");

// A fetch that answers each request in turn from `answers` (a Response, or
// an Error to throw), recording what was asked.
function fakeFetch(answers) {
  const asked = [];
  globalThis.fetch = async (url, options = {}) => {
    asked.push({ url, lastEventId: options.headers?.["Last-Event-ID"] ?? null });
    const answer = answers.shift();
    if (!answer) throw new Error(`nothing left to answer ${url}`);
    if (answer instanceof Error) throw answer;
    return typeof answer === "function" ? answer(url) : answer;
  };
  return asked;
}

const stream = (text, status = 200) => new Response(text, { status, headers: { "Content-Type": "text/event-stream" } });

test("parseSse gives complete events and keeps the incomplete rest", () => {
  const seen = [];
  const rest = parseSse('id: 1\nevent: delta\ndata: {"text":"a"}\n\nevent: fin', (...e) => seen.push(e));
  assert.deepEqual(seen, [["delta", { text: "a" }, "1"]]);
  assert.equal(rest, "event: fin");
});

test("parseSse reads CRLF, names an unnamed event 'message', and skips one without data", () => {
  const seen = [];
  const rest = parseSse('data: {"n":1}\r\n\r\nevent: ping\r\n\r\n', (...e) => seen.push(e));
  assert.deepEqual(seen, [["message", { n: 1 }, null]]);
  assert.equal(rest, "");
});

test("parseSse joins a chunked stream back into its events", () => {
  const text = sse([
    ["1", "step", { key: "k", label: "Reading" }],
    ["2", "final", { text: "done" }],
  ]);
  const seen = [];
  let buffer = "";
  for (let i = 0; i < text.length; i += 7)
    buffer = parseSse(buffer + text.slice(i, i + 7), (e, d, id) => seen.push([id, e, d]));
  assert.equal(buffer, "");
  assert.deepEqual(seen, [
    ["1", "step", { key: "k", label: "Reading" }],
    ["2", "final", { text: "done" }],
  ]);
});

test("a dropped stream is reopened from the last event seen, nothing shown twice", async () => {
  const asked = fakeFetch([
    stream(
      sse([
        ["1", "run_started", { run_id: "r1" }],
        ["2", "delta", { run_id: "r1", text: "Hel" }],
      ]),
    ),
    stream(
      sse([
        ["3", "delta", { run_id: "r1", text: "lo" }],
        ["4", "final", { run_id: "r1", text: "Hello" }],
      ]),
    ),
  ]);
  const events = [];
  const followed = await followRun(
    () => fetch("/api/agent/conversations/c/messages", { method: "POST" }),
    (event) => events.push(event),
    { onError: assert.fail },
  );
  assert.deepEqual(events, ["run_started", "delta", "delta", "final"]);
  assert.deepEqual(followed, { ended: true, runId: "r1", lastId: "4" });
  assert.deepEqual(asked[1], { url: "/api/agent/runs/r1/events", lastEventId: "2" });
});

test("the gateway's own error without an id is not the run's end: the stream is reopened", async () => {
  const asked = fakeFetch([
    stream(
      sse([
        ["1", "run_started", { run_id: "r2" }],
        [null, "error", { message: "stream interrupted" }],
      ]),
    ),
    stream(sse([["2", "final", { run_id: "r2", text: "ok" }]])),
  ]);
  const events = [];
  const followed = await followRun(
    () => fetch("/first"),
    (event) => events.push(event),
    { onError: assert.fail },
  );
  assert.deepEqual(events, ["run_started", "final"]);
  assert.equal(followed.ended, true);
  assert.equal(asked[1].lastEventId, "1");
});

test("reopenings that bring nothing new are given up after `attempts`, saying where to go on from", async () => {
  const asked = fakeFetch([stream(sse([["5", "delta", { run_id: "r3", text: "x" }]])), stream(""), stream("")]);
  const followed = await followRun(
    () => fetch("/first"),
    () => {},
    { onError: assert.fail, attempts: 1 },
  );
  assert.deepEqual(followed, { ended: false, runId: "r3", lastId: "5" });
  assert.equal(asked.length, 3);
  assert.ok(asked.slice(1).every((a) => a.lastEventId === "5"));
});

test("a refused request is told to onError in the reader's words, and ends the following", async () => {
  fakeFetch([new Response(JSON.stringify({ error: { message: "no such run", reason: "" } }), { status: 404 })]);
  const errors = [];
  const followed = await followRun(() => fetch("/first"), assert.fail, { onError: (m) => errors.push(m) });
  assert.deepEqual(errors, ["no such run"]);
  assert.equal(followed.ended, true);
});

test("a server never reached before the run started is an error to show", async () => {
  fakeFetch([new TypeError("network")]);
  await assert.rejects(
    followRun(() => fetch("/first"), assert.fail, { onError: assert.fail }),
    /The server cannot be reached/,
  );
});

test("followToEnd reads an ended run's stored events after the stream gave up", async () => {
  const asked = fakeFetch([
    stream(sse([["1", "run_started", { run_id: "r4" }]])),
    stream(""),
    stream(""),
    stream(""),
    stream(""),
    stream(""),
    stream(""),
    new Response(JSON.stringify({ id: "r4", status: "completed" }), { status: 200 }),
    stream(sse([["2", "final", { run_id: "r4", text: "done" }]])),
  ]);
  const events = [];
  let ended = null;
  await followToEnd(
    () => fetch("/first"),
    (event) => events.push(event),
    {
      onError: assert.fail,
      onEnded: (run) => (ended = run),
    },
  );
  assert.deepEqual(events, ["run_started", "final"]);
  assert.equal(ended, null);
  assert.deepEqual(asked.at(-2), { url: "/api/agent/runs/r4", lastEventId: null });
  assert.deepEqual(asked.at(-1), { url: "/api/agent/runs/r4/events", lastEventId: "1" });
});
