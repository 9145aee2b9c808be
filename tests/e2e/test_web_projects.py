"""Projects in the browser, against the real processes: the switcher in the
top bar lists the user's projects (the personal one first, "Personal" or
"Personnel"), remembers the choice, and the Memory view shows the chosen
project's notes only; a project is created from the page, and a taken or
malformed id is refused with the server's reason; the members panel adds a
member, changes a role and removes one, in English and in French, shows the
server's 409 (the last owner) and 403 (a role that may not) reasons, and a
member leaves a shared project."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import HeldRequests, assert_accessible, logged_in, send, shot

browser = web.browser
page = web.page


def api(
    launched: Launched, method: str, path: str, user: str = "alice", body: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.request(
        method, f"{launched.url}/api/agent{path}", json=body, headers=launched.headers(user), timeout=30
    )


def create_project(launched: Launched, user: str = "alice") -> tuple[str, str]:
    """A new project owned by ``user``, through the HTTP API: its id and name."""
    tag = uuid.uuid4().hex[:8]
    project_id, name = f"team-{tag}", f"Team {tag}"
    created = api(launched, "POST", "/projects", user, {"id": project_id, "display_name": name})
    assert created.status_code == 201, created.text
    return project_id, name


def members(launched: Launched, project_id: str) -> dict[str, str]:
    listed = api(launched, "GET", f"/projects/{project_id}/members")
    assert listed.status_code == 200, listed.text
    return {m["user_id"]: m["role"] for m in listed.json()["members"]}


def open_memory(page: Page) -> None:
    page.locator("#nav a[href='#memory']").click()
    expect(page.locator("#view-memory")).to_be_visible()


def test_the_switcher_lists_the_projects_and_the_memory_view_shows_the_chosen_ones_notes(
    browser: Browser, launched: Launched
) -> None:
    project_id, name = create_project(launched)
    title = f"Shared decision {project_id}"
    written = api(
        launched,
        "POST",
        f"/notes?project_id={project_id}",
        body={"kind": "decision", "title": title, "body": "The team ships on **Thursdays**."},
    )
    assert written.status_code == 201, written.text

    with logged_in(browser, launched, new=False) as page:
        options = page.locator("#project option")
        expect(options.first).to_have_text("Personal")
        expect(page.locator(f"#project option[value='{project_id}']")).to_have_text(name)
        expect(page.locator("#project-members")).to_be_enabled()

        # The personal project first: the project's note is not there.
        open_memory(page)
        expect(page.locator("#memory-project")).to_have_text("Project: Personal")
        expect(page.locator("#notes-label")).to_contain_text("newest first")
        expect(page.locator("#notes")).not_to_contain_text(title)

        # Chosen, the project's notes are shown, and every view names it.
        page.select_option("#project", project_id)
        expect(page.locator("#memory-project")).to_have_text(f"Project: {name}")
        note = page.locator("#notes li.note").filter(has_text=title)
        expect(note).to_have_count(1)
        expect(note.locator(".note-body strong")).to_have_text("Thursdays")
        expect(page.locator("#project-role")).to_have_text("Owner")
        shot(page, launched, "projects-memory")
        assert_accessible(page, "the Memory view of a shared project")

        # A note written on the page lands in the chosen project.
        own = f"Written in {project_id}"
        page.fill("#note-title", own)
        page.fill("#note-body", "Release notes go in the shared folder.")
        page.get_by_role("button", name="Save note").click()
        expect(page.locator("#memory-status")).to_have_text(f'Saved "{own}".')
        listed = api(launched, "GET", f"/notes?project_id={project_id}&page_size=200")
        assert listed.status_code == 200, listed.text
        assert own in [n["title"] for n in listed.json()["notes"]]

        # The choice is remembered.
        page.reload()
        web.ready(page)
        expect(page.locator("#project")).to_have_value(project_id)
        expect(page.locator("#notes li.note").filter(has_text=title)).to_have_count(1)

        # Back to the personal project: neither note is shown.
        page.select_option("#project", index=0)
        expect(page.locator("#memory-project")).to_have_text("Project: Personal")
        expect(page.locator("#notes-label")).to_contain_text("newest first")
        expect(page.locator("#notes")).not_to_contain_text(title)
        expect(page.locator("#notes")).not_to_contain_text(own)

        # The Agents view's project context follows the switcher too.
        rules = f"Rules of {project_id}: every change ships with its test."
        saved = api(launched, "PUT", f"/project-context?project_id={project_id}", body={"body": rules})
        assert saved.status_code == 200, saved.text
        page.locator("#nav a[href='#agents']").click()
        expect(page.locator("#agents-project")).to_have_text("Project: Personal")
        expect(page.locator("#project-context")).not_to_have_value(rules)
        page.select_option("#project", project_id)
        expect(page.locator("#agents-project")).to_have_text(f"Project: {name}")
        expect(page.locator("#project-context")).to_have_value(rules)

        # A chat run reads the chosen project's notes (its message names the project).
        page.locator("#nav a[href='#chat']").click()
        expect(page.locator("#chat-project")).to_have_text(f"Project: {name}")
        with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/messages")) as sent:
            run = send(page, "On which day does the team ship?")
        assert sent.value.post_data_json["project_id"] == project_id
        expect(run.locator(".sources a.recalled-note", has_text=title)).to_be_visible()


def settle(page: Page) -> None:
    """Lets the page handle what has just arrived (a few event-loop turns)."""
    page.evaluate("() => new Promise((done) => setTimeout(done, 200))")


def test_a_late_answer_for_the_previous_project_never_overwrites_the_chosen_ones(
    browser: Browser, launched: Launched
) -> None:
    """The personal project's context and notes are held back until after a
    switch to a shared project whose own answers come first: the late ones
    are dropped, and the page shows the chosen project's."""
    project_id, _name = create_project(launched)
    rules = f"Règles de {project_id} : chaque changement arrive avec son test."
    assert api(launched, "PUT", f"/project-context?project_id={project_id}", body={"body": rules}).is_success
    note = f"Décision partagée {project_id}"
    body = {"kind": "decision", "title": note, "body": "On livre le jeudi."}
    assert api(launched, "POST", f"/notes?project_id={project_id}", body=body).is_success
    with logged_in(browser, launched, new=False, locale="fr-FR") as page:
        page.select_option("#project", index=0)
        held = HeldRequests("GET")

        def personal(url: str) -> bool:  # the personal project's context or notes
            return ("/project-context" in url or "/notes" in url) and "project_id=personal-" in url

        page.route(personal, held)
        with page.expect_request(lambda r: "/project-context" in r.url and personal(r.url)):
            page.locator("#nav a[href='#agents']").click()
        page.select_option("#project", project_id)
        expect(page.locator("#project-context")).to_have_value(rules)
        with page.expect_response(lambda r: personal(r.url)):
            held.release()
        settle(page)  # the late answer is handled, and must change nothing
        expect(page.locator("#project-context")).to_have_value(rules)
        page.unroute(personal, held)
        # The same in the Memory view: the personal project's notes held back.
        open_memory(page)
        expect(page.locator("#notes li.note").filter(has_text=note)).to_have_count(1)
        late = HeldRequests("GET")
        page.route(personal, late)
        with page.expect_request(lambda r: "/notes" in r.url and personal(r.url)):
            page.select_option("#project", index=0)
        page.select_option("#project", project_id)
        expect(page.locator("#notes li.note").filter(has_text=note)).to_have_count(1)
        with page.expect_response(lambda r: personal(r.url)):
            late.release()
        settle(page)
        expect(page.locator("#notes li.note").filter(has_text=note)).to_have_count(1)
        page.locator("#nav a[href='#agents']").click()
        expect(page.locator("#project-context")).to_have_value(rules)


def test_a_project_is_created_from_the_page_and_a_taken_or_malformed_id_is_refused(
    page: Page, launched: Launched
) -> None:
    tag = uuid.uuid4().hex[:8]
    project_id, name = f"page-{tag}", f"Page project {tag}"
    page.get_by_role("button", name="New project").click()
    dialog = page.locator("#new-project-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#new-project-id")).to_be_focused()
    assert_accessible(page, "the New project dialog")
    page.fill("#new-project-id", project_id)
    page.fill("#new-project-name", name)
    page.get_by_role("button", name="Create project").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#project")).to_have_value(project_id)
    expect(page.locator("#project option:checked")).to_have_text(name)
    expect(page.locator("#project-status")).to_have_text(f"Project {name} created: you are its owner.")
    assert members(launched, project_id) == {launched.user("alice"): "owner"}

    # The same id again: the server's 409, in the dialog, which stays open.
    page.get_by_role("button", name="New project").click()
    page.fill("#new-project-id", project_id)
    page.fill("#new-project-name", "Another name")
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/api/agent/projects")
    ) as taken:
        page.get_by_role("button", name="Create project").click()
    assert taken.value.status == 409
    refusal = taken.value.json()["error"]["message"]
    expect(page.locator("#new-project-status")).to_have_text(refusal)
    expect(dialog).to_be_visible()

    # A malformed id: the server's 400, shown the same way.
    page.fill("#new-project-id", "not an id!")
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/api/agent/projects")
    ) as bad:
        page.get_by_role("button", name="Create project").click()
    assert bad.value.status == 400
    expect(page.locator("#new-project-status")).to_have_text(re.compile(r"\S"))
    shot(page, launched, "projects-new-refused")
    page.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#project")).to_have_value(project_id)  # unchanged


TEXTS = {
    "en-GB": {
        "personal": "Personal",
        "members": "Members",
        "add": "Add member",
        "added": "{user} added with the role Viewer.",
        "role_of": "Role of {user}",
        "changed": "{user}'s role is now Editor.",
        "remove": "Remove {user}",
        "removed": "{user} was removed.",
        "editor": "Editor",
        "refused": "Not allowed: your role in this project does not permit this.",
        "leave": "Leave this project",
        "left": "You left {name}.",
        "close": "Close",
    },
    "fr-FR": {
        "personal": "Personnel",
        "members": "Membres",
        "add": "Ajouter le membre",
        "added": "{user} ajouté avec le rôle : Lecteur.",
        "role_of": "Rôle de {user}",
        "changed": "Le rôle de {user} est maintenant : Éditeur.",
        "remove": "Retirer {user}",
        "removed": "{user} a été retiré.",
        "editor": "Éditeur",
        "refused": "Non autorisé : votre rôle dans ce projet ne le permet pas.",
        "leave": "Quitter ce projet",
        "left": "Vous avez quitté {name}.",
        "close": "Fermer",
    },
}


@pytest.mark.parametrize("locale", sorted(TEXTS))
def test_the_members_panel_adds_a_member_changes_a_role_and_a_member_leaves(
    browser: Browser, launched: Launched, locale: str
) -> None:
    text = TEXTS[locale]
    project_id, name = create_project(launched)
    alice, bob, root = launched.user("alice"), launched.user("bob"), launched.user("root")

    with logged_in(browser, launched, locale=locale, new=False) as page:
        expect(page.locator("#project option").first).to_have_text(text["personal"])
        page.select_option("#project", project_id)
        page.get_by_role("button", name=text["members"], exact=True).click()
        dialog = page.locator("#members-dialog")
        expect(dialog).to_be_visible()
        expect(page.locator("#members-project")).to_have_text(name)
        expect(dialog.locator(f"li[data-user='{alice}']")).to_contain_text(alice)

        # An owner adds a member, then changes the member's role.
        page.fill("#member-user", bob)
        page.select_option("#member-role", "viewer")
        page.get_by_role("button", name=text["add"]).click()
        expect(page.locator("#members-status")).to_have_text(text["added"].format(user=bob))
        role = dialog.get_by_role("combobox", name=text["role_of"].format(user=bob))
        expect(role).to_have_value("viewer")
        assert members(launched, project_id)[bob] == "viewer"
        role.select_option("editor")
        expect(page.locator("#members-status")).to_have_text(text["changed"].format(user=bob))
        expect(dialog.get_by_role("combobox", name=text["role_of"].format(user=bob))).to_have_value("editor")
        assert members(launched, project_id)[bob] == "editor"
        shot(page, launched, f"projects-members-{locale}")
        assert_accessible(page, f"the members panel in {locale}")

        # The last owner stays owner: the server's 409 reason, and the role shown unchanged.
        own = dialog.get_by_role("combobox", name=text["role_of"].format(user=alice))
        with page.expect_response(
            lambda r: r.request.method == "PUT" and f"/members/{alice}" in r.url
        ) as refused:
            own.select_option("viewer")
        assert refused.value.status == 409
        expect(page.locator("#members-status")).to_have_text(refused.value.json()["error"]["message"])
        expect(dialog.get_by_role("combobox", name=text["role_of"].format(user=alice))).to_have_value("owner")

        # An owner removes a member.
        page.fill("#member-user", root)
        page.get_by_role("button", name=text["add"]).click()
        expect(dialog.locator(f"li[data-user='{root}']")).to_have_count(1)
        page.once("dialog", lambda confirm: confirm.accept())
        dialog.get_by_role("button", name=text["remove"].format(user=root)).click()
        expect(page.locator("#members-status")).to_have_text(text["removed"].format(user=root))
        expect(dialog.locator(f"li[data-user='{root}']")).to_have_count(0)
        assert root not in members(launched, project_id)
        dialog.get_by_role("button", name=text["close"]).click()
        expect(dialog).to_be_hidden()

    with logged_in(browser, launched, user="bob", locale=locale, new=False) as page:
        page.select_option("#project", project_id)
        page.get_by_role("button", name=text["members"], exact=True).click()
        dialog = page.locator("#members-dialog")
        expect(dialog).to_be_visible()
        # Not an owner: no write controls, the roles as text.
        expect(page.locator("#member-form")).to_be_hidden()
        expect(dialog.locator("li select")).to_have_count(0)
        expect(dialog.locator(f"li[data-user='{bob}'] .badge")).to_have_text(text["editor"])
        assert_accessible(page, f"the members panel of an editor in {locale}")

        # The API still refuses what the role does not allow, and the page says why.
        page.locator("#member-form").evaluate("form => { form.hidden = false; }")
        page.fill("#member-user", root)
        with page.expect_response(
            lambda r: r.request.method == "PUT" and f"/members/{root}" in r.url
        ) as denied:
            page.get_by_role("button", name=text["add"]).click()
        assert denied.value.status == 403
        expect(page.locator("#members-status")).to_contain_text(text["refused"])
        assert root not in members(launched, project_id)

        # A member leaves: back in the personal project, the shared one gone from the list.
        page.once("dialog", lambda confirm: confirm.accept())
        page.get_by_role("button", name=text["leave"]).click()
        expect(dialog).to_be_hidden()
        expect(page.locator("#project-status")).to_have_text(text["left"].format(name=name))
        expect(page.locator(f"#project option[value='{project_id}']")).to_have_count(0)
        expect(page.locator("#project option:checked")).to_have_text(text["personal"])
        assert bob not in members(launched, project_id)
