// An AG-UI client run with the protocol's own SDK (@ag-ui/client's
// HttpAgent) against a launched Switchboard, for tests/e2e/test_agui.py.
// Every event it receives is validated against @ag-ui/core's schema.
//
//   node tests/e2e/agui_client.mjs '<json>'
//   { url, token, threadId, runId, message, lastEventId?, abortAfter?, forwardedProps?, resume? }
// Prints one JSON object: { events: [...], result?, messages?, state?, error? }.
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const options = JSON.parse(process.argv[2]);
const headers = { Authorization: `Bearer ${options.token}` };
if (options.lastEventId) headers["Last-Event-ID"] = String(options.lastEventId);
const agent = new HttpAgent({
  url: `${options.url}/api/agent/ag-ui`,
  headers,
  threadId: options.threadId,
  initialMessages: [{ id: `${options.runId}-user`, role: "user", content: options.message }],
});
const events = [];
const invalid = [];
// An aborted run's promise may never settle: the abort itself ends the wait.
let aborted;
const abort = new Promise((resolve) => (aborted = resolve));
const subscriber = {
  onEvent({ event }) {
    const checked = EventSchemas.safeParse(event);
    if (!checked.success) invalid.push({ event, issues: checked.error.issues });
    events.push(event);
    if (options.abortAfter && events.length === options.abortAfter) {
      agent.abortRun();
      aborted(null);
    }
  },
};
const output = { events, invalid };
try {
  const run = agent.runAgent(
    { runId: options.runId, forwardedProps: options.forwardedProps, resume: options.resume },
    subscriber,
  );
  const result = await Promise.race([run, abort]);
  output.result = result?.result ?? null;
  output.messages = agent.messages;
  // The state as the SDK holds it: the snapshot with the deltas applied.
  output.state = agent.state;
  output.aborted = result === null;
} catch (error) {
  output.error = String(error?.message ?? error);
}
process.stdout.write(JSON.stringify(output));
