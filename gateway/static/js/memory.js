// Memory: the chosen project's durable notes, listed or searched with the
// recall runs use, written, edited and deleted, and the notes its agents
// propose, each with its diff, for an editor or owner to accept or refuse.
// A run's Sources panel links each note it recalled here.

import { $, el, guard, json } from "./core.js";
import { diffLines } from "./diff.js";
import { t } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { mayWrite, sameProject, withProject } from "./projects.js";

const KINDS = ["decision", "feature_summary", "preference", "fact"];
const KIND_LABELS = {
  decision: "Decision",
  feature_summary: "Feature summary",
  preference: "Preference",
  fact: "Fact",
};

// Notes per page: the newest first; older ones under "Load more notes",
// read when it is pressed or scrolled to.
const NOTE_PAGE = 50;

// The list shown: the token of the next (older) page, the read in flight.
const list = { next: "", loading: null, observer: null, made: 0 };

export async function enterMemory(noteId) {
  for (const select of [$("note-kind")]) {
    select.replaceChildren(...KINDS.map((k) => el("option", { value: k, textContent: t(KIND_LABELS[k]) })));
  }
  await Promise.all([loadNotes(), loadProposals()]);
  if (noteId) {
    // A note linked from a run may be older than the first page: read on to it.
    const find = () => $("notes").querySelector(`[data-id="${CSS.escape(noteId)}"]`);
    const made = list.made; // a search or another project ends the reading
    while (!find() && list.next && made === list.made) await loadMore();
    const item = find();
    if (item) {
      item.classList.add("highlight");
      item.scrollIntoView({ block: "center" });
      item.querySelector("button")?.focus();
    } else {
      $("memory-status").textContent = t("That note no longer exists.");
    }
  }
}

const shownNotes = () => $("notes").querySelectorAll("li.note").length;

// The first page (or a search's best matches); `keep` notes at least, so a
// change to a note deep in the list leaves it in sight.
async function loadNotes(keep = 0) {
  const q = $("note-search").value.trim();
  const current = sameProject();
  const made = ++list.made;
  const query = new URLSearchParams(q ? { q } : { page_size: String(Math.min(500, Math.max(NOTE_PAGE, keep))) });
  const { notes, next_page_token: next } = await json(withProject(`/notes?${query}`));
  if (!current() || made !== list.made) return;
  list.next = q ? "" : next;
  $("notes").replaceChildren(
    ...(notes.length
      ? notes.map(noteView)
      : [el("li", { className: "empty", textContent: q ? t("No note matches.") : t("No notes yet.") })]),
  );
  notesLabel(q);
  watchMore();
}

function notesLabel(q) {
  const count = shownNotes();
  $("notes-label").textContent = q
    ? t("{count} notes a run asking this would recall, best first.", { count })
    : list.next
      ? t("The {count} newest notes; older ones follow below.", { count })
      : t("{count} notes, newest first.", { count });
}

// Under the list while older notes remain.
function moreControl() {
  let box = $("notes-more");
  if (!box) {
    const button = el("button", { type: "button", className: "load-more", textContent: t("Load more notes") });
    button.onclick = guard(loadMore, () => $("memory-status"));
    box = el("div", { id: "notes-more", className: "more" }, button);
    $("notes").after(box);
  }
  return box;
}

function watchMore() {
  const box = moreControl();
  box.hidden = !list.next;
  list.observer?.disconnect();
  if (!list.next || !("IntersectionObserver" in window)) return;
  list.observer = new IntersectionObserver((seen) => {
    if (seen.some((s) => s.isIntersecting)) guard(loadMore, () => $("memory-status"))();
  });
  // Observed anew after each page: a control still in sight reads on.
  list.observer.observe(box);
}

async function loadMore() {
  if (list.loading) return list.loading;
  if (!list.next) return undefined;
  const current = sameProject();
  const made = list.made;
  list.loading = (async () => {
    const query = new URLSearchParams({ page_size: String(NOTE_PAGE), page_token: list.next });
    const { notes, next_page_token: next } = await json(withProject(`/notes?${query}`));
    // Another project, a search or a change redrew the list meanwhile.
    if (!current() || made !== list.made) return;
    list.next = next;
    const known = new Set([...$("notes").querySelectorAll("li.note")].map((li) => li.dataset.id));
    $("notes").append(...notes.filter((n) => !known.has(n.id)).map(noteView));
    notesLabel("");
    watchMore();
  })();
  try {
    await list.loading;
  } finally {
    list.loading = null;
  }
  return undefined;
}

function noteView(note) {
  const body = el("div", { className: "note-body" });
  renderMarkdown(body, note.body);
  const edit = el("button", {
    type: "button",
    className: "small edit-note",
    textContent: t("Edit"),
    "aria-label": t("Edit {title}", note),
  });
  const remove = el("button", {
    type: "button",
    className: "small delete-note",
    textContent: t("Delete"),
    "aria-label": t("Delete {title}", note),
  });
  const item = el(
    "li",
    { className: "note", dataset: { id: note.id } },
    el(
      "div",
      { className: "note-head" },
      el("span", { className: "badge", textContent: t(KIND_LABELS[note.kind] || note.kind) }),
      " ",
      el("strong", { className: "note-title", textContent: note.title }),
      el("span", {
        className: "meta",
        textContent: ` · ${new Date(note.update_time || note.create_time).toLocaleString()}${note.tags.length ? " · " + note.tags.join(", ") : ""}${note.score !== undefined ? " · " + t("score {score}", { score: note.score.toFixed(2) }) : ""}`,
      }),
    ),
    body,
    edit,
    remove,
  );
  edit.onclick = () => editNote(item, note);
  remove.onclick = guard(
    async () => {
      if (!confirm(t('Delete the note "{title}"? Runs will no longer recall it.', note))) return;
      await json(`/notes/${encodeURIComponent(note.id)}`, { method: "DELETE" });
      $("memory-status").textContent = t('Deleted "{title}".', note);
      await loadNotes(shownNotes());
    },
    () => $("memory-status"),
  );
  return item;
}

// ---- Proposals ----

// The chosen project's pending proposals, newest first. A viewer reads them;
// the Accept and Refuse buttons are for editors and owners (the API still
// refuses, 403, what the role does not allow, and its reason is shown).
async function loadProposals() {
  const current = sameProject();
  const { proposals } = await json(withProject("/note-proposals?state=pending&page_size=200"));
  if (!current()) return;
  $("note-proposals-label").textContent = proposals.length
    ? t("{count} proposals waiting for review, newest first.", { count: proposals.length })
    : "";
  $("note-proposals").replaceChildren(
    ...(proposals.length
      ? proposals.map(proposalView)
      : [el("li", { className: "empty", textContent: t("No proposals waiting for review.") })]),
  );
}

function proposalView(proposal) {
  const { note } = proposal;
  const by = note.author_agent_id
    ? t("Proposed by {agent} in a run of {user}", { agent: note.author_agent_id, user: proposal.proposer_user_id })
    : t("Proposed in a run of {user}", { user: proposal.proposer_user_id });
  const target = proposal.target_note
    ? el(
        "p",
        { className: "target" },
        el("a", {
          href: `#memory/${encodeURIComponent(proposal.target_note.id)}`,
          textContent: t('Updates note "{title}"', proposal.target_note),
        }),
        proposal.match_reason
          ? el("small", { className: "meta", lang: "en", textContent: ` (${proposal.match_reason})` })
          : null,
      )
    : el("p", { className: "target", textContent: t("Adds a new note.") });
  const item = el(
    "li",
    { className: "note-proposal", dataset: { id: proposal.id } },
    el(
      "div",
      { className: "note-head" },
      el("span", { className: "badge", textContent: t(KIND_LABELS[note.kind] || note.kind) }),
      " ",
      el("strong", { className: "note-title", textContent: note.title }),
      el("span", {
        className: "meta",
        textContent: ` · ${by} · ${new Date(proposal.create_time).toLocaleString()}`,
      }),
    ),
    proposal.reason
      ? el(
          "p",
          { className: "reason" },
          el("span", { className: "meta", textContent: t("Why:") }),
          " ",
          proposal.reason,
        )
      : null,
    target,
    el(
      "div",
      { className: "diff", role: "group", "aria-label": t("Changes to the project's memory") },
      ...diffLines(proposal.diff),
    ),
  );
  if (mayWrite()) {
    const accept = el("button", {
      type: "button",
      className: "small accept",
      textContent: t("Accept"),
      "aria-label": t('Accept the proposal "{title}"', note),
    });
    const refuse = el("button", {
      type: "button",
      className: "small refuse",
      textContent: t("Refuse"),
      "aria-label": t('Refuse the proposal "{title}"', note),
    });
    const decide = (verb) =>
      guard(
        async () => {
          accept.disabled = refuse.disabled = true;
          try {
            await json(`/note-proposals/${encodeURIComponent(proposal.id)}/${verb}`, { method: "POST" });
          } catch (error) {
            accept.disabled = refuse.disabled = false;
            throw error;
          }
          $("note-proposals-status").textContent =
            verb === "accept"
              ? t('Accepted: "{title}" is now a note of this project.', note)
              : t('Refused: "{title}" was not written.', note);
          await Promise.all([loadProposals(), loadNotes(shownNotes())]);
          // The decided proposal left the list: focus goes back to its heading.
          $("note-proposals-title").focus();
        },
        () => $("note-proposals-status"),
      );
    accept.onclick = decide("accept");
    refuse.onclick = decide("refuse");
    item.append(accept, " ", refuse);
  }
  return item;
}

function editNote(item, note) {
  const title = el("input", { value: note.title, maxLength: 200, "aria-label": t("Title") });
  const body = el("textarea", { value: note.body, rows: 4, "aria-label": t("Text") });
  const save = el("button", { type: "submit", textContent: t("Save note") });
  const cancel = el("button", { type: "button", textContent: t("Cancel") });
  const form = el("form", { className: "note-edit" }, title, body, save, cancel);
  form.onsubmit = guard(
    async (event) => {
      event.preventDefault();
      await json(`/notes/${encodeURIComponent(note.id)}`, {
        method: "PATCH",
        body: JSON.stringify({ title: title.value.trim(), body: body.value }),
      });
      $("memory-status").textContent = t('Saved "{title}".', { title: title.value.trim() });
      await loadNotes(shownNotes());
    },
    () => $("memory-status"),
  );
  cancel.onclick = guard(
    () => loadNotes(shownNotes()),
    () => $("memory-status"),
  );
  item.replaceChildren(form);
  title.focus();
}

async function addNote(event) {
  event.preventDefault();
  const { note, outcome } = await json(withProject("/notes"), {
    method: "POST",
    body: JSON.stringify({
      kind: $("note-kind").value,
      title: $("note-title").value.trim(),
      body: $("note-body").value,
      request_id: crypto.randomUUID(),
    }),
  });
  $("note-form").reset();
  $("memory-status").textContent =
    outcome === "merged" ? t('Merged into the existing note "{title}".', note) : t('Saved "{title}".', note);
  await loadNotes(shownNotes());
}

export function wireMemory() {
  const status = () => $("memory-status");
  let timer = null;
  $("note-search").oninput = () => {
    clearTimeout(timer);
    timer = setTimeout(guard(loadNotes, status), 250);
  };
  $("note-form").onsubmit = guard(addNote, status);
}
