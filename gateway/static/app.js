// The chat panel: conversations (pin, rename, search), a composer with the
// All-sources popover and the model selector, runs streamed as SSE (steps,
// answer, model, skill, sources read, router decision), personalisation and
// instruction proposals. Plain ES module, no build step; every call goes to
// the gateway's /api/agent routes (docs/api.md).

// The API base comes from the page (a module script runs once <body> is parsed).
const API = document.body.dataset.api;
const $ = (id) => document.getElementById(id);
const state = { conversationId: null, models: [], sources: null, allowed: null, webConfirmed: false };

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key in node) node[key] = value;
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

async function json(path, options = {}) {
  const response = await fetch(API + path, { headers: { "Content-Type": "application/json" }, ...options });
  const body = response.status === 204 ? {} : await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

// ---- Conversations (pinned first, search by title, rename, pin) ----

async function loadConversations() {
  const q = $("search").value.trim();
  const { conversations } = await json("/conversations" + (q ? `?q=${encodeURIComponent(q)}` : ""));
  $("conversations").replaceChildren(...conversations.map(conversationItem));
  return conversations;
}

function conversationItem(c) {
  const title = c.title || "New conversation";
  const open = el("button", { type: "button", className: "open", textContent: title });
  open.onclick = () => openConversation(c.id);
  const pin = el("button", {
    type: "button", className: "small pin", textContent: c.pinned ? "Unpin" : "Pin",
    "aria-pressed": String(c.pinned), "aria-label": `${c.pinned ? "Unpin" : "Pin"} ${title}`,
  });
  pin.onclick = async () => {
    await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ pinned: !c.pinned }) });
    await loadConversations();
  };
  const rename = el("button", { type: "button", className: "small rename", textContent: "Rename", "aria-label": `Rename ${title}` });
  const item = el("li", { dataset: { id: c.id }, className: [c.pinned ? "pinned" : "", c.id === state.conversationId ? "active" : ""].join(" ").trim() }, open, pin, rename);
  rename.onclick = () => {
    const input = el("input", { value: c.title, className: "rename-input", "aria-label": "New title", maxLength: 200 });
    item.replaceChildren(input);
    input.focus();
    input.select();
    input.onkeydown = async (event) => {
      if (event.key === "Escape") await loadConversations();
      if (event.key !== "Enter" || !input.value.trim()) return;
      event.preventDefault();
      await json(`/conversations/${c.id}`, { method: "PATCH", body: JSON.stringify({ title: input.value.trim() }) });
      await loadConversations();
    };
  };
  return item;
}

async function openConversation(id) {
  state.conversationId = id;
  // A reload reopens this conversation (and its run, if one is going).
  sessionStorage.setItem("conversation", id);
  const [conversation, { entries }, { runs }] = await Promise.all([
    json(`/conversations/${id}`),
    json(`/conversations/${id}/entries`),
    json(`/conversations/${id}/runs?page_size=100`),
  ]);
  state.allowed = conversation.allowed_sources;
  renderSourceChecks();
  const byId = new Map(runs.map((r) => [r.id, r]));
  $("log").replaceChildren(...entries.map((entry) => {
    if (entry.role === "user") return el("div", { className: "msg" }, el("div", { className: "user", textContent: entry.content }));
    const block = runBlock("");
    block.answer.textContent = entry.content;
    const run = byId.get(entry.run_id);
    if (run) showRunRecord(block, run);
    return block.item;
  }));
  await loadConversations();
  // Reloading mid-run: the newest run is still going, so attach to its stream.
  const running = runs.find((r) => r.status === "running");
  if (running) {
    const block = runBlock("");
    block.item.dataset.resumed = "true";
    $("log").append(block.item);
    await follow(block, () => fetch(`${API}/runs/${running.id}/events`, { headers: { "Last-Event-ID": "0" } }));
  }
}

async function newConversation() {
  const conversation = await json("/conversations", {
    method: "POST", body: JSON.stringify({ allowed_sources: state.allowed || { workspace: true } }),
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
  box.onchange = saveSources;
  return el("label", {}, box, " " + (option.title || option.name));
}

async function loadSources() {
  state.sources = await json("/sources");
  const { connectors, mcp_servers: mcp } = state.sources;
  $("source-connectors").replaceChildren(...(connectors.length ? [el("strong", { textContent: "Connectors" })] : []), ...connectors.map((c) => sourceCheckbox("connector", c)));
  $("source-mcp").replaceChildren(...(mcp.length ? [el("strong", { textContent: "MCP servers" })] : []), ...mcp.map((m) => sourceCheckbox("mcp", m)));
  $("source-workspace").onchange = saveSources;
}

function selectedModel() {
  return state.models.find((m) => m.id === $("model").value) || { id: "auto", web_only: false };
}

function renderSourceChecks() {
  const allowed = state.allowed || { workspace: true, connectors: [], mcp_servers: [] };
  const webOnly = selectedModel().web_only;
  for (const box of document.querySelectorAll("#sources-popover input[type=checkbox]")) {
    const { kind, name } = box.dataset;
    const ticked = kind === "workspace" ? allowed.workspace !== false
      : kind === "connector" ? (allowed.connectors || []).includes(name) : (allowed.mcp_servers || []).includes(name);
    // A web-only model reads neither the workspace nor connectors: shown unticked for its runs.
    box.checked = ticked && !(webOnly && kind !== "mcp");
    box.disabled = webOnly && kind !== "mcp";
  }
  const warning = $("web-warning");
  warning.hidden = !webOnly;
  warning.textContent = webOnly ? `${selectedModel().label} is web-only: your workspace and connectors will not be read for its runs.` : "";
}

async function saveSources() {
  const pick = (kind) => [...document.querySelectorAll(`#sources-popover input[data-kind=${kind}]:checked`)].map((b) => b.dataset.name);
  const allowed = { workspace: $("source-workspace").checked, connectors: pick("connector"), mcp_servers: pick("mcp") };
  if (!state.conversationId) await newConversation();
  const conversation = await json(`/conversations/${state.conversationId}/sources`, { method: "PUT", body: JSON.stringify(allowed) });
  state.allowed = conversation.allowed_sources;
}

async function loadModels() {
  const [{ models }, settings] = await Promise.all([json("/models"), json("/personal-settings")]);
  state.models = models;
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, textContent: m.label + (m.web_only ? " (web only)" : "") + (m.expensive ? " (expensive)" : "") })));
  $("model").value = settings.default_model || "auto";
  applySettings(settings);
}

async function loadChips() {
  const { actions } = await json("/suggested-actions?page_type=chat");
  $("chips").replaceChildren(...actions.map((action) => {
    const chip = el("button", { type: "button", className: "chip", textContent: action.label });
    // Prefills only: a suggestion never starts a run.
    chip.onclick = () => { $("message").value = action.prompt; $("message").focus(); };
    return chip;
  }));
}

// ---- A run: streamed events, then its record ----

function runBlock(text) {
  const item = el("div", { className: "msg run" });
  if (text) item.append(el("div", { className: "user", textContent: text }));
  const parts = {
    steps: el("ul", { className: "steps", "aria-label": "Steps" }),
    notices: el("div", { className: "notices" }),
    answer: el("div", { className: "answer" }),
    meta: el("div", { className: "meta" }),
    skill: el("div", { className: "skill" }),
    extra: el("div", { className: "extra" }),
  };
  item.append(parts.steps, parts.notices, parts.answer, parts.meta, parts.skill, parts.extra);
  return { item, ...parts, runId: null };
}

function parseSse(buffer, onEvent) {
  // Splits the buffer into complete SSE events; returns the unparsed rest.
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    let event = "message", data = "";
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data += line.slice(5).trim();
    }
    if (data) onEvent(event, JSON.parse(data));
  }
  return rest;
}

async function follow(block, request) {
  const response = await request();
  if (response.status === 204) return;
  if (!response.ok) {
    const body = await response.json();
    block.answer.className = "answer error";
    block.answer.textContent = body.error.message;
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer = parseSse(buffer + value, (event, data) => onRunEvent(block, event, data));
  }
}

function onRunEvent(block, event, data) {
  block.runId = data.run_id;
  block.item.dataset.runId = data.run_id;
  if (event === "step") {
    let li = block.steps.querySelector(`[data-key="${data.key}"]`);
    if (!li) { li = el("li", { dataset: { key: data.key } }); block.steps.append(li); }
    li.textContent = data.label;
    li.className = data.status;
  } else if (event === "skill_used") {
    block.steps.append(el("li", { className: "completed", textContent: `Skill: ${data.name} (${data.invocation})` }));
  } else if (event === "delta") {
    block.answer.textContent += data.text;
  } else if (event === "notice") {
    block.notices.append(el("p", { className: "notice", textContent: data.message, dataset: { code: data.code } }));
  } else if (event === "proposal") {
    block.extra.append(proposalView(data));
  } else if (event === "final") {
    block.answer.textContent = data.text;
    // A run waiting for approval (a proposal) has used no model.
    block.meta.textContent = data.model ? `Model: ${data.model}` : "";
    json(`/runs/${data.run_id}`).then((run) => showRunRecord(block, run));
  } else if (event === "error") {
    block.answer.className = "answer error";
    block.answer.textContent = data.message;
  }
}

function showRunRecord(block, run) {
  block.item.dataset.runId = run.id;
  block.runId = run.id;
  if (run.model) block.meta.textContent = `Model: ${run.model}`;
  block.skill.textContent = run.skills.length ? `Skill: ${run.skills.map((s) => s.name).join(", ")}` : "";
  const panel = el("section", { className: "sources", "aria-label": "Sources" }, el("strong", { textContent: "Sources" }));
  // Only what the run actually read (the record's sources), plus the skills applied.
  const read = [...run.sources.map((s) => `${s.kind}: ${s.title || s.id}`), ...run.skills.map((s) => `skill: ${s.name}`)];
  panel.append(read.length ? el("ul", {}, ...read.map((text) => el("li", { textContent: text }))) : el("p", { textContent: "Nothing was read." }));
  if (run.skills.some((s) => s.invocation === "auto")) panel.append(whyThisSkill(run));
  block.extra.querySelector(".sources")?.remove();
  block.extra.prepend(panel);
}

function whyThisSkill(run) {
  const decision = run.router_decision || {};
  const rows = (decision.candidates || []).map((c) => el("li", { textContent: `${c.name}: fused ${c.fused_score ?? 0}, lexical ${c.lexical_score ?? 0}, embedding ${c.embedding_score ?? 0}` }));
  const details = el("details", { className: "why" }, el("summary", { textContent: "Why this skill?" }),
    el("p", { className: "branch", textContent: `Decision: ${decision.branch || "none"} (high ${decision.high_threshold ?? "-"}, low ${decision.low_threshold ?? "-"})` }),
    el("ul", {}, ...rows));
  for (const skill of run.skills.filter((s) => s.invocation === "auto")) {
    const button = el("button", { type: "button", className: "not-relevant", textContent: `This skill was not relevant (${skill.name})` });
    const status = el("p", { role: "status" });
    button.onclick = async () => {
      button.disabled = true;
      const answer = await json(`/runs/${run.id}/feedback`, { method: "POST", body: JSON.stringify({ skill_id: skill.skill_id }) });
      status.textContent = `Noted: ${skill.name} was not relevant here.`;
      if (answer.offer_disable_auto_use) {
        const off = el("button", { type: "button", className: "disable-auto", textContent: `Stop using ${skill.name} automatically` });
        off.onclick = async () => {
          const { method, path, body } = answer.disable_auto_use;
          await fetch(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
          status.textContent = `${skill.name} is no longer used automatically.`;
          off.remove();
        };
        status.after(off);
      }
    };
    details.append(button, status);
  }
  return details;
}

function proposalView(event) {
  const box = el("section", { className: "proposal", "aria-label": "Instruction proposal", dataset: { proposalId: event.proposal_id } },
    el("strong", { textContent: `Proposed change to "${event.page_title}"` }),
    el("p", { textContent: event.summary }));
  const diff = el("div", { className: "diff" });
  const status = el("p", { className: "decision", role: "status" });
  const accept = el("button", { type: "button", className: "accept", textContent: "Accept" });
  const refuse = el("button", { type: "button", className: "refuse", textContent: "Refuse" });
  const decide = async (verb) => {
    accept.disabled = refuse.disabled = true;
    try {
      const answer = await json(`/proposals/${event.proposal_id}/${verb}`, { method: "POST", body: "{}" });
      status.textContent = verb === "accept" ? `Accepted: "${answer.page.title}" is now version ${answer.page.version}.` : "Refused: nothing was written.";
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
  json(`/proposals/${event.proposal_id}`).then((proposal) => {
    const lines = proposal.diff.hunks.flatMap((h) => h.lines);
    const mark = { added: "+ ", removed: "- ", context: "  " };
    diff.replaceChildren(...lines.map((line) => el("div", { className: line.kind, textContent: mark[line.kind] + line.text })));
  }, () => { diff.textContent = event.unified_diff; });
  return box;
}

async function send(text) {
  const block = runBlock(text);
  $("log").append(block.item);
  const model = $("model").value;
  await follow(block, () => fetch(`${API}/conversations/${state.conversationId}/messages`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ message: text, model, request_id: crypto.randomUUID() }),
  }));
  await loadConversations();
}

async function submit() {
  const text = $("message").value.trim();
  if (!text) return;
  // A web-only model: say so before sending, and send only once confirmed.
  if (selectedModel().web_only && !state.webConfirmed) {
    $("web-confirm-text").textContent = `${selectedModel().label} will not read your workspace, pages or connectors. Send anyway?`;
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

// ---- Personalisation ----

function applySettings(settings) {
  $("name-view").textContent = settings.display_name || "Your agent";
  $("avatar-view").textContent = (settings.avatar && settings.avatar.emoji) || "";
  document.body.className = `mode-${settings.chat_mode}`;
}

async function openPersonal() {
  const [settings, pages, { templates }] = await Promise.all([
    json("/personal-settings"), json("/personal-settings/instruction-pages"), json("/instruction-templates"),
  ]);
  $("display-name").value = settings.display_name;
  $("avatar").value = (settings.avatar && settings.avatar.emoji) || "";
  $("chat-mode").value = settings.chat_mode;
  renderPages(pages);
  $("template").replaceChildren(...templates.map((t) => el("option", { value: t.id, textContent: t.title })));
  $("personal-status").textContent = "";
  $("personal").showModal();
}

function renderPages(pages) {
  const options = pages.pages.map((p) => el("option", { value: p.page_id, disabled: p.state !== "readable", textContent: p.title + (p.state !== "readable" ? " (no longer readable)" : "") }));
  $("instruction-page").replaceChildren(el("option", { value: "", textContent: "None", disabled: true }), ...options);
  $("instruction-page").value = pages.active_instruction_page_id || "";
  $("page-notice").textContent = pages.notice;
}

async function savePersonal() {
  const avatar = $("avatar").value ? { emoji: $("avatar").value } : {};
  const settings = await json("/personal-settings", {
    method: "PUT", body: JSON.stringify({ display_name: $("display-name").value, avatar, chat_mode: $("chat-mode").value }),
  });
  applySettings(settings);
  $("personal-status").textContent = "Saved.";
}

async function switchPage() {
  await json("/personal-settings/instructions-page/active", { method: "PUT", body: JSON.stringify({ page_id: $("instruction-page").value }) });
  renderPages(await json("/personal-settings/instruction-pages"));
  $("personal-status").textContent = "Active instruction page switched.";
}

async function createPage() {
  await json("/personal-settings/instructions-page", {
    method: "POST", body: JSON.stringify({ template_id: $("template").value, title: $("page-title").value.trim(), request_id: crypto.randomUUID() }),
  });
  $("page-title").value = "";
  renderPages(await json("/personal-settings/instruction-pages"));
  $("personal-status").textContent = "Instruction page created and made active.";
}

// ---- Wiring ----

function toggleSources() {
  const popover = $("sources-popover");
  popover.hidden = !popover.hidden;
  $("sources-button").setAttribute("aria-expanded", String(!popover.hidden));
}

let searchTimer = null;
$("search").oninput = () => { clearTimeout(searchTimer); searchTimer = setTimeout(loadConversations, 150); };
$("new").onclick = newConversation;
$("sources-button").onclick = toggleSources;
$("sources-popover").onkeydown = (event) => { if (event.key === "Escape") { toggleSources(); $("sources-button").focus(); } };
$("model").onchange = () => { state.webConfirmed = false; $("web-confirm").hidden = true; renderSourceChecks(); };
$("web-confirm-send").onclick = () => { state.webConfirmed = true; submit(); };
$("web-confirm-cancel").onclick = () => { $("web-confirm").hidden = true; $("message").focus(); };
$("composer").onsubmit = async (event) => { event.preventDefault(); await opened; await submit(); };
$("message").onkeydown = (event) => { if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit(); };
$("personalise").onclick = openPersonal;
$("save-personal").onclick = savePersonal;
$("instruction-page").onchange = switchPage;
$("create-page").onclick = createPage;

// Opening the page shows the latest conversation; sending waits for that to
// finish, so a fast first message is never wiped by the history loading.
const opened = (async () => {
  await Promise.all([loadSources(), loadModels(), loadChips()]);
  const list = await loadConversations();
  const last = sessionStorage.getItem("conversation");
  const current = list.find((c) => c.id === last) || list[0];
  if (current) await openConversation(current.id);
  else renderSourceChecks();
  document.body.dataset.ready = "true";
})();
