"""Rules of pages (owner, ACL, versions, restore), instruction pages and
proposals. No gRPC here.

Access (services.memory.pages.access, one rule for every path): the owner
reads, edits, changes the ACL and decides proposals; editors (users, and the
editors of a project shared as editor) read and edit; readers (users, and
the members of a shared project) read. A page the caller cannot read is
NOT_FOUND, exactly like a missing id. Every write of a page's text (an edit,
a restore, an accepted proposal) goes through :meth:`PagesDomain._write`, so
each one makes a new immutable version the same way.

The caller's instruction pages live in their personal settings
(``instruction_page_ids``, ``active_instruction_page_id``), read and written
through :class:`PersonalSettingsRepository`, which owns that row."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from services.memory.pages.access import OWNER, PageAccess, grant_rows
from services.memory.pages.diffs import TextDiff, diff_texts
from services.memory.pages.models import (
    PROPOSAL_PENDING,
    PROPOSAL_REFUSED,
    ROLE_EDITOR,
    ROLE_READER,
    Page,
    PageAcl,
    PageVersion,
    Proposal,
)
from services.memory.pages.repository import PagesRepository, ProposalDecided, VersionWrite
from services.memory.personal.models import PersonalSettings
from services.memory.personal.repository import PersonalSettingsRepository
from services.memory.projects.domain import ProjectsDomain
from services.shared.audit import Actor
from services.shared.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    QuotaExceeded,
    TooLarge,
)
from services.shared.language import is_tag, primary
from services.shared.masks import masked_fields
from services.shared.pagination import (
    Cursor,
    as_count,
    as_instant,
    as_text,
    by_offset,
    offset_token,
    page_of,
    page_request,
)
from services.shared.time import utcnow

MAX_TITLE_CHARS = 200
MAX_ID_CHARS = 128
MAX_RUN_ID_CHARS = 64
MAX_ACL_ENTRIES = 100
MAX_REASON_CHARS = 1000
# Same bound as PersonalSettingsDomain's instruction_page_ids.
MAX_INSTRUCTION_PAGES = 100
# Each diff carried in a FAILED_PRECONDITION's ErrorInfo is cut to this many
# characters: gRPC clients refuse trailers above 8 KiB. GetProposal has them whole.
ERROR_DIFF_CHARS = 2000

PAGE_PATHS = frozenset({"title", "body"})

# InstructionPageState of pages.proto.
INSTRUCTIONS_NONE = 1
INSTRUCTIONS_READABLE = 2
INSTRUCTIONS_UNREADABLE = 3


@dataclass(frozen=True)
class InstructionTemplate:
    id: str
    title: str
    description: str
    body: str
    # The language the template is written in (BCP 47: "en", "fr"): the page
    # offers the templates of its interface's language first.
    language: str = "en"


_REMINDER = (
    "> Anyone who can edit this page changes how your agent behaves. "
    "To share an example, duplicate the page instead of sharing it."
)
_REMINDER_FR = (
    "> Quiconque peut modifier cette page change le comportement de votre agent. "
    "Pour partager un exemple, dupliquez la page au lieu de la partager."
)
DEFAULT_TEMPLATE_ID = "my-switchboard-ai"
TEMPLATES = (
    InstructionTemplate(
        id=DEFAULT_TEMPLATE_ID,
        title="My Switchboard AI",
        description="Your private instruction page: tone, what to remember, where to look first.",
        body=(
            "# My Switchboard AI\n\n"
            f"{_REMINDER}\n\n"
            "## Desired tone\n\n"
            "- e.g. concise, friendly, answers in the language of the question\n\n"
            "## What the agent should remember\n\n"
            "### My role\n\n"
            "- e.g. product manager of the mobile team\n\n"
            "### My habits\n\n"
            "- e.g. I review pull requests in the morning; summaries as bullet points\n\n"
            "## Pages and channels to consult first\n\n"
            "- e.g. the roadmap page, the #mobile channel\n"
        ),
    ),
    InstructionTemplate(
        id="team-lead",
        title="Team lead assistant",
        description="For someone who coordinates a team: decisions, follow-ups, status.",
        body=(
            "# Team lead assistant\n\n"
            f"{_REMINDER}\n\n"
            "## Desired tone\n\n"
            "- Direct and brief; lead with the decision or the question to settle\n\n"
            "## What the agent should remember\n\n"
            "### My role\n\n"
            "- I lead a team and track its decisions and blockers\n\n"
            "### My habits\n\n"
            "- Weekly status on Mondays; I want owners and dates on every action\n\n"
            "## Pages and channels to consult first\n\n"
            "- The team's decision log page, the team channel\n"
        ),
    ),
    InstructionTemplate(
        id="mon-ia-switchboard",
        title="Mon IA Switchboard",
        description="Votre page d'instructions privée : le ton, ce qu'il faut retenir, où chercher d'abord.",
        body=(
            "# Mon IA Switchboard\n\n"
            f"{_REMINDER_FR}\n\n"
            "## Ton souhaité\n\n"
            "- p. ex. concis, cordial, répond dans la langue de la question\n\n"
            "## Ce que l'agent doit retenir\n\n"
            "### Mon rôle\n\n"
            "- p. ex. responsable produit de l'équipe mobile\n\n"
            "### Mes habitudes\n\n"
            "- p. ex. je relis les pull requests le matin ; des résumés en puces\n\n"
            "## Pages et canaux à consulter d'abord\n\n"
            "- p. ex. la page de la feuille de route, le canal #mobile\n"
        ),
        language="fr",
    ),
    InstructionTemplate(
        id="chef-equipe",
        title="Assistant de chef d'équipe",
        description="Pour qui coordonne une équipe : décisions, suivis, points d'avancement.",
        body=(
            "# Assistant de chef d'équipe\n\n"
            f"{_REMINDER_FR}\n\n"
            "## Ton souhaité\n\n"
            "- Direct et bref ; commencer par la décision ou la question à trancher\n\n"
            "## Ce que l'agent doit retenir\n\n"
            "### Mon rôle\n\n"
            "- Je dirige une équipe et je suis ses décisions et ses blocages\n\n"
            "### Mes habitudes\n\n"
            "- Point d'avancement le lundi ; un responsable et une date pour chaque action\n\n"
            "## Pages et canaux à consulter d'abord\n\n"
            "- La page du journal des décisions de l'équipe, le canal de l'équipe\n"
        ),
        language="fr",
    ),
)


def default_template_id(language: str) -> str:
    """The first template written in ``language`` (a BCP 47 tag: "fr",
    "fr-CA"), else the English default: a user who speaks French and has no
    page yet gets "Mon IA Switchboard", not its English twin."""
    wanted = primary(language)
    if wanted and wanted != "en":
        for template in TEMPLATES:
            if template.language == wanted:
                return template.id
    return DEFAULT_TEMPLATE_ID


@dataclass(frozen=True)
class PageView:
    """A page with its ACL, as the caller may see it."""

    page: Page
    readers: list[str]
    editors: list[str]
    role: str
    reader_projects: list[str] = field(default_factory=list)
    editor_projects: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InstructionList:
    page_ids: list[str]
    active_page_id: str


@dataclass(frozen=True)
class InstructionPageInfo:
    page_id: str
    state: int
    active: bool
    page: Page | None


@dataclass(frozen=True)
class ActiveInstructions:
    state: int
    page_id: str = ""
    page: Page | None = None
    notice: str = ""


@dataclass(frozen=True)
class ProposalView:
    proposal: Proposal
    diff: TextDiff
    # Set while pending when the page has moved past the base version and the
    # caller can still read it.
    current_version: int = 0
    base_to_current: TextDiff | None = None
    current_to_proposed: TextDiff | None = None


# Validation helpers


def clean_title(title: str, field: str = "page.title") -> str:
    title = title.strip()
    if not title:
        raise InvalidArgument(f"{field} must not be empty", field=field)
    if len(title) > MAX_TITLE_CHARS:
        raise TooLarge(f"{field} is longer than {MAX_TITLE_CHARS} characters", field=field)
    return title


def clean_id(value: str, field: str) -> str:
    value = value.strip()
    if not value:
        raise InvalidArgument(f"{field} is required", field=field)
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgument(f"{field} is longer than {MAX_ID_CHARS} characters", field=field)
    return value


def clean_acl(owner: str, readers: Sequence[str], editors: Sequence[str]) -> tuple[list[str], list[str]]:
    """Distinct, sorted user ids; the owner is dropped (implied both); a user
    listed as both is an editor."""
    editor_set = {clean_id(user, "editor_user_ids") for user in editors} - {owner}
    reader_set = {clean_id(user, "reader_user_ids") for user in readers} - {owner} - editor_set
    if len(editor_set) + len(reader_set) > MAX_ACL_ENTRIES:
        raise TooLarge(f"an ACL holds at most {MAX_ACL_ENTRIES} users", field="reader_user_ids")
    return sorted(reader_set), sorted(editor_set)


def acl_rows(page_id: str, readers: Sequence[str], editors: Sequence[str]) -> list[PageAcl]:
    return [PageAcl(page_id=page_id, user_id=user, role=ROLE_READER) for user in readers] + [
        PageAcl(page_id=page_id, user_id=user, role=ROLE_EDITOR) for user in editors
    ]


def version_label(page_id: str, version: int) -> str:
    return f"{page_id}@v{version}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _by_time(cursor: Cursor) -> tuple[datetime, str]:
    return as_instant(cursor["time"]), as_text(cursor["id"])


class PagesDomain:
    def __init__(
        self,
        repository: PagesRepository,
        settings_repository: PersonalSettingsRepository,
        max_page_chars: int,
        max_pending_proposals: int,
        projects: ProjectsDomain,
    ) -> None:
        self._repo = repository
        self._rule = PageAccess(repository, projects)
        self._settings = settings_repository
        self._max_page_chars = max_page_chars
        self._max_pending_proposals = max_pending_proposals

    def _check_body(self, body: str, field: str) -> str:
        if len(body) > self._max_page_chars:
            raise TooLarge(f"{field} is longer than {self._max_page_chars} characters", field=field)
        return body

    # Access

    async def _access(self, user_id: str, page_id: str) -> tuple[Page, str]:
        """The page and the caller's role; NOT_FOUND when they cannot read it."""
        page = await self._repo.get_page(page_id) if page_id else None
        if page is not None:
            role = await self._rule.role(user_id, page)
            if role is not None:
                return page, role
        raise NotFound(f"page {page_id!r} not found", page_id=page_id)

    async def _editable(self, user_id: str, page_id: str) -> tuple[Page, str]:
        page, role = await self._access(user_id, page_id)
        if role == ROLE_READER:
            raise FailedPrecondition(
                f"you can read page {page_id!r} but not edit it: only its owner and editors can",
                page_id=page_id,
            )
        return page, role

    async def _owned(self, user_id: str, page_id: str, action: str) -> Page:
        page, role = await self._access(user_id, page_id)
        if role != OWNER:
            raise FailedPrecondition(f"only the owner of page {page_id!r} can {action}", page_id=page_id)
        return page

    async def _view(self, page: Page, role: str) -> PageView:
        return (await self._views([page], {page.id: role}))[0]

    async def _views(self, pages: Sequence[Page], roles: dict[str, str]) -> list[PageView]:
        ids = [page.id for page in pages]
        acl, grants = await self._repo.acl(ids), await self._repo.project_acl(ids)
        views = []
        for page in pages:
            users = [row for row in acl if row.page_id == page.id]
            projects = [row for row in grants if row.page_id == page.id]
            views.append(
                PageView(
                    page,
                    [row.user_id for row in users if row.role == ROLE_READER],
                    [row.user_id for row in users if row.role == ROLE_EDITOR],
                    # A share removed since the page was listed reads as reader, the least right.
                    roles.get(page.id, ROLE_READER),
                    [row.project_id for row in projects if row.role == ROLE_READER],
                    [row.project_id for row in projects if row.role == ROLE_EDITOR],
                )
            )
        return views

    async def _readable_or_none(self, user_id: str, page_id: str) -> Page | None:
        try:
            page, _ = await self._access(user_id, page_id)
        except NotFound:
            return None
        return page

    # Pages

    async def create_page(
        self,
        user_id: str,
        request_id: str,
        title: str,
        body: str,
        readers: Sequence[str] = (),
        editors: Sequence[str] = (),
        reader_projects: Sequence[str] = (),
        editor_projects: Sequence[str] = (),
        actor: Actor | None = None,
    ) -> PageView:
        """``actor``: the caller as the projects service sees them, to resolve
        the projects shared with (a user's by default)."""
        title = clean_title(title)
        body = self._check_body(body, "page.body")
        readers, editors = clean_acl(user_id, readers, editors)
        reader_projects, editor_projects = await self._rule.resolve(
            actor or Actor(user_id, "user"), reader_projects, editor_projects
        )
        now = utcnow()
        page = Page(
            id=str(uuid.uuid4()),
            owner_user_id=user_id,
            title=title,
            body=body,
            version=1,
            request_id=request_id.strip() or None,
            create_time=now,
            update_time=now,
        )
        saved, _ = await self._repo.insert_page(
            page,
            acl_rows(page.id, readers, editors),
            grant_rows(page.id, reader_projects, editor_projects),
        )
        return await self._view(saved, OWNER)

    async def get_page(self, user_id: str, page_id: str) -> PageView:
        page, role = await self._access(user_id, page_id)
        return await self._view(page, role)

    async def list_pages(self, user_id: str, requested_size: int, token: str) -> tuple[list[PageView], str]:
        size, after = page_request(requested_size, token, _by_time)
        fetched = await self._repo.readable_pages(user_id, after, size + 1)
        rows, next_token = page_of(
            fetched, size, lambda last: {"time": last.update_time.isoformat(), "id": last.id}
        )
        return await self._views(rows, await self._rule.roles(user_id, rows)), next_token

    async def update_page(
        self, user_id: str, page_id: str, title: str, body: str, paths: Sequence[str], expected_version: int
    ) -> PageView:
        paths = masked_fields(paths, PAGE_PATHS)
        if expected_version < 0:
            raise InvalidArgument("expected_version must not be negative", field="expected_version")
        new_title = clean_title(title) if "title" in paths else None
        new_body = self._check_body(body, "page.body") if "body" in paths else None
        page, role = await self._editable(user_id, page_id)
        write = VersionWrite(author_user_id=user_id, title=new_title, body=new_body)
        saved = await self._write(page, expected_version, write)
        return await self._view(saved, role)

    async def _write(self, page: Page, expected_version: int, write: VersionWrite) -> Page:
        """The one path that writes a page's text (edit, restore, accepted
        proposal): a new version on top of the current one. With
        ``expected_version`` (> 0) only if the page is still at that version."""
        saved = await self._repo.write_version(page.id, expected_version or None, write)
        if saved is not None:
            return saved
        current = await self._repo.get_page(page.id)
        if current is None:
            raise NotFound(f"page {page.id!r} not found", page_id=page.id)
        raise FailedPrecondition(
            f"page {page.id!r} is at version {current.version}, not {expected_version}",
            page_id=page.id,
            current_version=str(current.version),
        )

    async def delete_page(self, user_id: str, page_id: str) -> None:
        await self._owned(user_id, page_id, "delete it")
        await self._repo.delete_page(page_id)

    async def set_acl(
        self,
        actor: Actor,
        page_id: str,
        readers: Sequence[str],
        editors: Sequence[str],
        reader_projects: Sequence[str] = (),
        editor_projects: Sequence[str] = (),
    ) -> PageView:
        """Replaces the user and project lists; owner only. Each project must
        be one the owner is a member of (NOT_FOUND otherwise)."""
        page = await self._owned(actor.user, page_id, "change its ACL")
        readers, editors = clean_acl(page.owner_user_id, readers, editors)
        reader_projects, editor_projects = await self._rule.resolve(actor, reader_projects, editor_projects)
        saved = await self._repo.set_acl(
            page_id,
            acl_rows(page_id, readers, editors),
            grant_rows(page_id, reader_projects, editor_projects),
        )
        if saved is None:
            raise NotFound(f"page {page_id!r} not found", page_id=page_id)
        return PageView(saved, readers, editors, OWNER, reader_projects, editor_projects)

    # Versions

    async def list_versions(
        self, user_id: str, page_id: str, requested_size: int, token: str
    ) -> tuple[Sequence[PageVersion], str]:
        size, before = page_request(requested_size, token, lambda cursor: as_count(cursor["before"]))
        await self._access(user_id, page_id)
        rows = await self._repo.list_versions(page_id, before, size + 1)
        return page_of(rows, size, lambda last: {"before": last.version})

    async def get_version(self, user_id: str, page_id: str, version: int) -> PageVersion:
        if version <= 0:
            raise InvalidArgument("version must be a version number (from 1)", field="version")
        await self._access(user_id, page_id)
        row = await self._repo.get_version(page_id, version)
        if row is None:
            raise NotFound(f"page {page_id!r} has no version {version}", page_id=page_id)
        return row

    async def restore_version(
        self, user_id: str, page_id: str, version: int, expected_version: int
    ) -> PageView:
        if expected_version < 0:
            raise InvalidArgument("expected_version must not be negative", field="expected_version")
        old = await self.get_version(user_id, page_id, version)
        page, role = await self._editable(user_id, page_id)
        write = VersionWrite(
            author_user_id=user_id, title=old.title, body=old.body, restored_from_version=old.version
        )
        saved = await self._write(page, expected_version, write)
        return await self._view(saved, role)

    # Instruction pages

    async def _instruction_list(self, user_id: str) -> InstructionList:
        return _listed(await self._settings.get_settings(user_id))

    async def _save_instruction_list(self, user_id: str, ids: list[str], active: str) -> InstructionList:
        saved = await self._settings.upsert_settings(
            user_id,
            {
                "instruction_page_ids_json": json.dumps(ids, ensure_ascii=False),
                "active_instruction_page_id": active,
            },
        )
        return InstructionList(
            [str(page) for page in json.loads(saved.instruction_page_ids_json)],
            saved.active_instruction_page_id,
        )

    @staticmethod
    def template(template_id: str, language: str = "") -> InstructionTemplate:
        """The template ``template_id``; "" is the default one of ``language``
        (a BCP 47 tag; English when no template is written in it)."""
        wanted = template_id.strip() or default_template_id(language)
        for template in TEMPLATES:
            if template.id == wanted:
                return template
        raise NotFound(f"instruction template {wanted!r} not found", template_id=wanted)

    @staticmethod
    def list_templates(requested_size: int, token: str) -> tuple[Sequence[InstructionTemplate], str]:
        size, start = page_request(requested_size, token, by_offset)
        start = start or 0
        return TEMPLATES[start : start + size], offset_token(start + size, len(TEMPLATES))

    async def create_instruction_page(
        self, user_id: str, request_id: str, template_id: str, title: str, language: str = ""
    ) -> tuple[PageView, InstructionList]:
        """A private copy of the template (by default the default template of
        ``language``), added to the caller's instruction pages and made
        active. A retry (same request_id) finds the page made the first time
        and finishes the settings update if it was interrupted."""
        if not is_tag(language):
            raise InvalidArgument("language must be a BCP 47 language tag (e.g. en, fr)", field="language")
        template = self.template(template_id, language)
        current = await self._instruction_list(user_id)
        if len(current.page_ids) >= MAX_INSTRUCTION_PAGES:
            raise QuotaExceeded(
                f"at most {MAX_INSTRUCTION_PAGES} instruction pages", field="instruction_page_ids"
            )
        view = await self.create_page(user_id, request_id, title.strip() or template.title, template.body)
        page_id = view.page.id
        if page_id in current.page_ids:
            return view, current  # a retry of a request that had finished
        return view, await self._save_instruction_list(user_id, [*current.page_ids, page_id], page_id)

    async def add_instruction_page(self, user_id: str, page_id: str, make_active: bool) -> InstructionList:
        page_id = clean_id(page_id, "page_id")
        await self._access(user_id, page_id)
        current = await self._instruction_list(user_id)
        ids = current.page_ids
        if page_id not in ids:
            if len(ids) >= MAX_INSTRUCTION_PAGES:
                raise QuotaExceeded(
                    f"at most {MAX_INSTRUCTION_PAGES} instruction pages", field="instruction_page_ids"
                )
            ids = [*ids, page_id]
        active = page_id if make_active or not current.active_page_id else current.active_page_id
        return await self._save_instruction_list(user_id, ids, active)

    async def remove_instruction_page(self, user_id: str, page_id: str) -> InstructionList:
        page_id = clean_id(page_id, "page_id")
        current = await self._instruction_list(user_id)
        if page_id not in current.page_ids:
            raise NotFound(f"page {page_id!r} is not one of your instruction pages", page_id=page_id)
        ids = [page for page in current.page_ids if page != page_id]
        active = "" if current.active_page_id == page_id else current.active_page_id
        return await self._save_instruction_list(user_id, ids, active)

    async def set_active_instruction_page(self, user_id: str, page_id: str) -> InstructionList:
        """Makes one of the caller's instruction pages active; "" means none."""
        page_id = page_id.strip()
        current = await self._instruction_list(user_id)
        if page_id:
            if page_id not in current.page_ids:
                raise FailedPrecondition(
                    f"page {page_id!r} is not one of your instruction pages: add it first", page_id=page_id
                )
            if await self._readable_or_none(user_id, page_id) is None:
                raise FailedPrecondition(
                    f"instruction page {page_id!r} is no longer readable (deleted or access removed)",
                    page_id=page_id,
                )
        return await self._save_instruction_list(user_id, current.page_ids, page_id)

    async def list_instruction_pages(
        self, user_id: str, requested_size: int, token: str
    ) -> tuple[list[InstructionPageInfo], str, str]:
        size, start = page_request(requested_size, token, by_offset)
        start = start or 0
        current = await self._instruction_list(user_id)
        ids = current.page_ids[start : start + size]
        pages = await self._repo.get_pages(ids)
        roles = await self._rule.roles(user_id, list(pages.values()))
        infos = []
        for page_id in ids:
            page = pages.get(page_id)
            readable = page is not None and page_id in roles
            infos.append(
                InstructionPageInfo(
                    page_id=page_id,
                    state=INSTRUCTIONS_READABLE if readable else INSTRUCTIONS_UNREADABLE,
                    active=page_id == current.active_page_id,
                    page=page if readable else None,
                )
            )
        return infos, offset_token(start + size, len(current.page_ids)), current.active_page_id

    async def active_instructions(
        self, user_id: str, settings: PersonalSettings | None = None
    ) -> ActiveInstructions:
        """What the engine puts in the instruction layer: the active page's
        text, or NONE, or UNREADABLE with a notice (never an error).
        ``settings``: the user's settings, when the caller read them already."""
        current = _listed(settings) if settings is not None else await self._instruction_list(user_id)
        if not current.active_page_id:
            return ActiveInstructions(INSTRUCTIONS_NONE)
        page = await self._readable_or_none(user_id, current.active_page_id)
        if page is None:
            return ActiveInstructions(
                INSTRUCTIONS_UNREADABLE,
                current.active_page_id,
                notice=(
                    f"The active instruction page {current.active_page_id!r} is no longer readable "
                    "(deleted or access removed); it was skipped."
                ),
            )
        return ActiveInstructions(INSTRUCTIONS_READABLE, page.id, page)

    # Proposals

    async def create_proposal(
        self,
        user_id: str,
        request_id: str,
        page_id: str,
        proposed_body: str,
        reason: str,
        agent_id: str,
        run_id: str = "",
    ) -> ProposalView:
        proposed_body = self._check_body(proposed_body, "proposed_body")
        reason = reason.strip()
        if len(reason) > MAX_REASON_CHARS:
            raise TooLarge(f"reason is longer than {MAX_REASON_CHARS} characters", field="reason")
        if len(agent_id) > MAX_ID_CHARS:
            raise InvalidArgument(
                f"proposer_agent_id is longer than {MAX_ID_CHARS} characters", field="proposer_agent_id"
            )
        if len(run_id) > MAX_RUN_ID_CHARS:
            raise InvalidArgument(f"run_id is longer than {MAX_RUN_ID_CHARS} characters", field="run_id")
        page, _ = await self._access(user_id, page_id)
        if proposed_body == page.body:
            raise InvalidArgument(
                f"the proposal changes nothing: it equals version {page.version} of the page",
                field="proposed_body",
            )
        if await self._repo.pending_proposals(page.id) >= self._max_pending_proposals:
            raise QuotaExceeded(
                f"page {page.id!r} has {self._max_pending_proposals} pending proposals already; "
                "decide some first",
                page_id=page.id,
            )
        proposal = await self._repo.insert_proposal(
            Proposal(
                id=str(uuid.uuid4()),
                page_id=page.id,
                page_owner_user_id=page.owner_user_id,
                proposer_user_id=user_id,
                proposer_agent_id=agent_id.strip(),
                run_id=run_id.strip(),
                base_version=page.version,
                proposed_body=proposed_body,
                reason=reason,
                state=PROPOSAL_PENDING,
                request_id=request_id.strip() or None,
                create_time=utcnow(),
            )
        )
        return ProposalView(proposal, diff_texts(page.body, proposal.proposed_body, *self._labels(proposal)))

    @staticmethod
    def _labels(proposal: Proposal) -> tuple[str, str]:
        return version_label(proposal.page_id, proposal.base_version), f"proposal {proposal.id}"

    async def _visible_proposal(self, user_id: str, proposal_id: str) -> Proposal:
        """The page's owner sees it; its proposer too, while they may read the page."""
        proposal = await self._repo.get_proposal(proposal_id) if proposal_id else None
        visible = proposal is not None and (
            proposal.page_owner_user_id == user_id
            or (
                proposal.proposer_user_id == user_id
                and await self._readable_or_none(user_id, proposal.page_id) is not None
            )
        )
        if proposal is None or not visible:
            raise NotFound(f"proposal {proposal_id!r} not found", proposal_id=proposal_id)
        return proposal

    async def _base_body(self, proposal: Proposal) -> str:
        base = await self._repo.get_version(proposal.page_id, proposal.base_version)
        return base.body if base is not None else ""

    async def get_proposal(self, user_id: str, proposal_id: str) -> ProposalView:
        proposal = await self._visible_proposal(user_id, proposal_id)
        base_body = await self._base_body(proposal)
        view = ProposalView(proposal, diff_texts(base_body, proposal.proposed_body, *self._labels(proposal)))
        if proposal.state != PROPOSAL_PENDING:
            return view
        page = await self._readable_or_none(user_id, proposal.page_id)
        if page is None or page.version == proposal.base_version:
            return view
        base_to_current, current_to_proposed = self._drift(proposal, base_body, page)
        return ProposalView(view.proposal, view.diff, page.version, base_to_current, current_to_proposed)

    @staticmethod
    def _drift(proposal: Proposal, base_body: str, page: Page) -> tuple[TextDiff, TextDiff]:
        current = version_label(page.id, page.version)
        return (
            diff_texts(base_body, page.body, version_label(page.id, proposal.base_version), current),
            diff_texts(page.body, proposal.proposed_body, current, f"proposal {proposal.id}"),
        )

    async def list_proposals(
        self, user_id: str, page_id: str, state: int, requested_size: int, token: str
    ) -> tuple[list[ProposalView], str]:
        if state not in (0, 1, 2, 3):
            raise InvalidArgument(f"state {state} is not a proposal state", field="state")
        size, after = page_request(requested_size, token, _by_time)
        fetched = await self._repo.visible_proposals(user_id, page_id.strip(), state, after, size + 1)
        rows, next_token = page_of(
            fetched, size, lambda last: {"time": last.create_time.isoformat(), "id": last.id}
        )
        bases = await self._repo.get_versions([(p.page_id, p.base_version) for p in rows])
        views = []
        for proposal in rows:
            base = bases.get((proposal.page_id, proposal.base_version))
            diff = diff_texts(base.body if base else "", proposal.proposed_body, *self._labels(proposal))
            views.append(ProposalView(proposal, diff))
        return views, next_token

    async def _decidable(self, user_id: str, proposal_id: str) -> Proposal:
        proposal = await self._visible_proposal(user_id, proposal_id)
        if proposal.page_owner_user_id != user_id:
            raise FailedPrecondition(
                f"only the owner of page {proposal.page_id!r} can decide proposal {proposal_id!r}",
                proposal_id=proposal_id,
            )
        if proposal.state != PROPOSAL_PENDING:
            raise self._decided(proposal)
        return proposal

    @staticmethod
    def _decided(proposal: Proposal) -> FailedPrecondition:
        state = "accepted" if proposal.state != PROPOSAL_REFUSED else "refused"
        return FailedPrecondition(
            f"proposal {proposal.id!r} was {state} already; a decided proposal cannot be decided again",
            proposal_id=proposal.id,
            state=state,
        )

    async def accept_proposal(self, user_id: str, proposal_id: str, reason: str) -> tuple[Proposal, PageView]:
        """Writes the proposed body as a new version through :meth:`_write`
        (the path of every edit), only if the page is still at the base version."""
        reason = self._check_reason(reason)
        proposal = await self._decidable(user_id, proposal_id)
        page, role = await self._access(user_id, proposal.page_id)
        if page.version != proposal.base_version:
            raise await self._not_acceptable(user_id, proposal)
        try:
            write = VersionWrite(
                author_user_id=user_id,
                body=proposal.proposed_body,
                proposal_id=proposal.id,
                decision_reason=reason,
            )
            saved = await self._write(page, proposal.base_version, write)
        except ProposalDecided:
            raise self._decided(await self._visible_proposal(user_id, proposal_id)) from None
        except FailedPrecondition:
            raise await self._not_acceptable(user_id, proposal) from None
        decided = await self._visible_proposal(user_id, proposal_id)
        return decided, await self._view(saved, role)

    async def _not_acceptable(self, user_id: str, proposal: Proposal) -> FailedPrecondition:
        """Why a proposal whose page has moved cannot be accepted: a concurrent
        accept of this very proposal moved it (decided), or another edit did (stale)."""
        latest = await self._visible_proposal(user_id, proposal.id)
        if latest.state != PROPOSAL_PENDING:
            return self._decided(latest)
        page, _ = await self._access(user_id, proposal.page_id)
        return self._stale(proposal, await self._base_body(proposal), page)

    def _stale(self, proposal: Proposal, base_body: str, page: Page) -> FailedPrecondition:
        base_to_current, current_to_proposed = self._drift(proposal, base_body, page)
        return FailedPrecondition(
            f"page {page.id!r} changed since proposal {proposal.id!r} was made: the proposal is against "
            f"version {proposal.base_version}, the page is at version {page.version}. Nothing was written. "
            "The error details carry base_to_current (what changed since, "
            f"{version_label(page.id, proposal.base_version)} -> {version_label(page.id, page.version)}) and "
            f"current_to_proposed (what accepting would change now, {version_label(page.id, page.version)} "
            "-> proposal); GetProposal returns both whole.",
            proposal_id=proposal.id,
            page_id=page.id,
            base_version=str(proposal.base_version),
            current_version=str(page.version),
            base_to_current=_clip(base_to_current.unified, ERROR_DIFF_CHARS),
            current_to_proposed=_clip(current_to_proposed.unified, ERROR_DIFF_CHARS),
        )

    async def refuse_proposal(self, user_id: str, proposal_id: str, reason: str) -> Proposal:
        """Writes nothing but the proposal's state."""
        reason = self._check_reason(reason)
        proposal = await self._decidable(user_id, proposal_id)
        decided = await self._repo.decide_proposal(proposal.id, PROPOSAL_REFUSED, reason)
        if decided is None:
            raise self._decided(await self._visible_proposal(user_id, proposal_id))
        return decided

    @staticmethod
    def _check_reason(reason: str) -> str:
        reason = reason.strip()
        if len(reason) > MAX_REASON_CHARS:
            raise TooLarge(
                f"decision_reason is longer than {MAX_REASON_CHARS} characters", field="decision_reason"
            )
        return reason


def _listed(settings: PersonalSettings | None) -> InstructionList:
    """The instruction pages a settings row lists (none without a row)."""
    if settings is None:
        return InstructionList([], "")
    ids = [str(page) for page in json.loads(settings.instruction_page_ids_json or "[]")]
    return InstructionList(ids, settings.active_instruction_page_id)
