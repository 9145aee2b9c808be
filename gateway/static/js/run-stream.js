// A run as it streams: its events drawn into its block (steps, answer,
// notices, proposals, how it ended), followed to its end however often the
// stream drops, and stopped with the Stop button meanwhile.

import { API, $, el, followToEnd, json } from "./core.js";
import { t } from "./i18n.js";
import { errorCause, invocationText, noticeView } from "./notices.js";
import { state } from "./chat-state.js";
import { runBlock, showEnding, showRunRecord } from "./run-block.js";
import { proposalView } from "./proposals.js";

const ERROR_STATUS = { CANCELLED: "cancelled", BUDGET_EXCEEDED: "budget_exceeded" };

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

export async function stream(block, request) {
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

// Reloading mid-run: the conversation's newest run is still going, so its
// block attaches to its stream from the first event.
export function resumeRun(runId) {
  const block = runBlock("");
  block.item.dataset.resumed = "true";
  const log = $("log");
  log.append(block.item);
  log.scrollTop = log.scrollHeight;
  // Not awaited: the page is usable (and the run stoppable) while it streams.
  stream(block, () => fetch(`${API}/runs/${runId}/events`, { headers: { "Last-Event-ID": "0" } }));
}
