// The Agents view: the chosen project's registry (register, rename, pin a
// provider, change the model, which may swap the provider, and choose how a
// command-line provider receives the agent's context), and each agent's one shared thread:
// whole by default and live while runs stream, filtered by pair or by
// correlation (each labelled a partial view), with the rotation seams and
// their handoff summaries, exported as a download and imported back.

import { API, $, el, download, followToEnd, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { streamMarkdown } from "./markdown.js";
import { errorCause, noticeView } from "./notices.js";
import { sameProject, withProject, withSharedProject } from "./projects.js";
import { POLL_MS, view } from "./agents-state.js";
import { forgetThread, kind, refreshThread, setFilter } from "./agent-thread.js";

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
        remoteBadge(agent),
      );
    }),
  );
}

// An agent asked over A2A at another address: marked, with its card's name
// (its card's URL on hover).
function remoteBadge(agent) {
  if (!agent.remote) return null;
  return el("span", {
    className: "badge remote",
    textContent: t("remote: {name}", { name: agent.remote.card_name || agent.remote.card_url }),
    title: agent.remote.card_url,
  });
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
