// Instruction pages: the list of the user's pages with the active
// one marked, an editor where each save writes a new version, the versions
// with restore, adding an existing page and removing one from the list. The
// active page is also named in the chat header, always in view.

import { $, el, guard, json } from "./core.js";
import { t } from "./i18n.js";
import { suggestions } from "./suggestions.js";

const view = { list: null, selected: null, page: null };

export async function loadReminder() {
  const list = await json("/personal-settings/instruction-pages");
  const active = list.pages.find((p) => p.page_id === list.active_instruction_page_id);
  $("active-page").textContent = active ? t("Instructions: {title}", active) : t("Instructions: none");
  $("active-page").title = t("The instruction page your agent follows. Open it to edit or switch.");
  return list;
}

export async function enterInstructions() {
  view.list = await loadReminder();
  const [{ pages }] = await Promise.all([json("/pages?page_size=500")]);
  const listed = new Set(view.list.pages.map((p) => p.page_id));
  $("add-existing").replaceChildren(
    ...pages.filter((p) => !listed.has(p.id)).map((p) => el("option", { value: p.id, textContent: p.title })),
  );
  $("add-existing-row").hidden = !$("add-existing").options.length;
  $("instructions-notice").textContent = view.list.notice;
  renderList();
  const wanted =
    view.selected && listed.has(view.selected)
      ? view.selected
      : view.list.active_instruction_page_id || view.list.pages[0]?.page_id;
  if (wanted) await selectPage(wanted);
  else $("page-editor").hidden = true;
}

function renderList() {
  const active = view.list.active_instruction_page_id;
  $("instruction-list").replaceChildren(
    ...view.list.pages.map((p) => {
      const isActive = p.page_id === active;
      const open = el("button", {
        type: "button",
        className: "link open-page",
        textContent: p.title,
        "aria-current": p.page_id === view.selected ? "true" : "false",
      });
      open.onclick = guard(
        () => selectPage(p.page_id),
        () => $("instructions-status"),
      );
      const use = el("button", {
        type: "button",
        className: "small use-page",
        textContent: t("Use"),
        disabled: isActive || p.state !== "readable",
        "aria-label": t("Use {title}", p),
      });
      use.onclick = guard(
        async () => {
          await json("/personal-settings/instructions-page/active", {
            method: "PUT",
            body: JSON.stringify({ page_id: p.page_id }),
          });
          $("instructions-status").textContent = t("{title} is now your active instruction page.", p);
          await enterInstructions();
        },
        () => $("instructions-status"),
      );
      const remove = el("button", {
        type: "button",
        className: "small remove-page",
        textContent: t("Remove"),
        "aria-label": t("Remove {title} from the list", p),
      });
      remove.onclick = guard(
        async () => {
          await json(`/personal-settings/instruction-pages/${encodeURIComponent(p.page_id)}`, { method: "DELETE" });
          $("instructions-status").textContent = t("{title} was removed from your list (the page itself stays).", p);
          if (view.selected === p.page_id) view.selected = null;
          await enterInstructions();
        },
        () => $("instructions-status"),
      );
      return el(
        "li",
        { dataset: { id: p.page_id }, className: isActive ? "active" : "" },
        open,
        isActive ? el("span", { className: "badge", textContent: t("active") }) : null,
        p.state !== "readable" ? el("span", { className: "warning", textContent: t("no longer readable") }) : null,
        use,
        remove,
      );
    }),
  );
}

async function selectPage(id) {
  view.selected = id;
  const [page, { versions }] = await Promise.all([
    json(`/pages/${encodeURIComponent(id)}`),
    json(`/pages/${encodeURIComponent(id)}/versions?page_size=100`),
  ]);
  view.page = page;
  $("page-editor").hidden = false;
  $("editor-title").value = page.title;
  $("editor-body").value = page.body;
  $("editor-version").textContent = t("Version {version}", page);
  renderList();
  renderVersions(versions);
  await pageSuggestions();
}

// Suggestions for this page (a "page"), on the text selected in the editor
// if any; the message a chip prefills goes with this page and that text as
// its context.
function pageSuggestions() {
  const box = $("editor-body");
  const selection = box.value.slice(box.selectionStart, box.selectionEnd);
  const page = { id: view.page.id, title: view.page.title, type: "page" };
  const context = { page, selections: selection.trim() ? [{ text: selection }] : [] };
  return suggestions($("page-chips"), "page", selection, `@page:${view.page.id}`, context);
}

function renderVersions(versions) {
  $("versions").replaceChildren(
    ...versions.map((v) => {
      const origin = v.restored_from_version
        ? t("restored from version {n}", { n: v.restored_from_version })
        : v.proposal_id
          ? t("an accepted proposal")
          : t("an edit");
      const text = el(
        "details",
        {},
        el("summary", {
          textContent: t("Version {version} · {time} · {author}, {origin}", {
            version: v.version,
            time: new Date(v.create_time).toLocaleString(),
            author: v.author_user_id,
            origin,
          }),
        }),
        el("pre", { className: "version-body", textContent: v.body }),
      );
      const current = v.version === view.page.version;
      const restore = el("button", {
        type: "button",
        className: "small restore",
        textContent: current ? t("current") : t("Restore"),
        disabled: current,
        // The current version's button says "current": a name that said
        // "Restore" would not be what it shows.
        ...(current ? {} : { "aria-label": t("Restore version {version}", v) }),
      });
      restore.onclick = guard(
        async () => {
          const page = await json(`/pages/${encodeURIComponent(view.page.id)}/versions/${v.version}/restore`, {
            method: "POST",
            body: JSON.stringify({ expected_version: view.page.version }),
          });
          $("instructions-status").textContent = t("Version {old} restored as version {version}.", {
            old: v.version,
            version: page.version,
          });
          await selectPage(page.id);
        },
        () => $("instructions-status"),
      );
      return el("li", { dataset: { version: String(v.version) } }, text, restore);
    }),
  );
}

async function savePage(event) {
  event.preventDefault();
  const page = await json(`/pages/${encodeURIComponent(view.page.id)}`, {
    method: "PATCH",
    body: JSON.stringify({
      title: $("editor-title").value.trim(),
      body: $("editor-body").value,
      expected_version: view.page.version,
    }),
  });
  $("instructions-status").textContent = t("Saved as version {version}.", page);
  view.list = await loadReminder();
  await selectPage(page.id);
}

async function addExisting() {
  const id = $("add-existing").value;
  if (!id) return;
  await json("/personal-settings/instructions-page", {
    method: "POST",
    body: JSON.stringify({ page_id: id, make_active: false }),
  });
  $("instructions-status").textContent = t("Page added to your list.");
  view.selected = id;
  await enterInstructions();
}

export function wireInstructions() {
  const status = () => $("instructions-status");
  $("editor-form").onsubmit = guard(savePage, status);
  $("add-existing-button").onclick = guard(addExisting, status);
  let selected = "";
  const follow = guard(() => {
    const box = $("editor-body");
    const text = box.value.slice(box.selectionStart, box.selectionEnd);
    if (text === selected) return undefined;
    selected = text;
    return pageSuggestions();
  }, status);
  for (const type of ["select", "keyup", "mouseup"]) $("editor-body").addEventListener(type, follow);
  document.addEventListener("instructions-changed", () => {
    loadReminder().catch(() => {});
  });
}
