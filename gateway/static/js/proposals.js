// A run's proposed changes to the instructions: the diff, to accept or refuse,
// shown as the run streams and again when its conversation is reopened.

import { API, el, followRun, json } from "./core.js";
import { t } from "./i18n.js";
import { diffLines } from "./diff.js";

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

// A run waiting for approval shows its proposals again (from its stored
// events), still to accept or refuse, in the conversation that made them.
export function replayProposals(block, runId) {
  followRun(
    () => fetch(`${API}/runs/${runId}/events`, { headers: { "Last-Event-ID": "0" } }),
    (event, data) => {
      if (event === "proposal" && !block.extra.querySelector(`[data-proposal-id="${data.proposal_id}"]`))
        block.extra.append(proposalView(data));
    },
    { onError: (message) => block.notices.append(el("p", { className: "error", textContent: message })) },
  ).catch((error) => block.notices.append(el("p", { className: "error", textContent: error.message })));
}
