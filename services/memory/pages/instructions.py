"""The caller's instruction pages: the pages a user made theirs, the one
runs read (the active one), and a new private page made from a template.
They live in the user's personal settings (``instruction_page_ids``,
``active_instruction_page_id``), read and written through
:class:`PersonalSettingsRepository`, which owns that row."""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.memory.pages import templates
from services.memory.pages.access import PageAccess, clean_id
from services.memory.pages.models import Page
from services.memory.pages.pages import Pages, PageView
from services.memory.pages.repository import PagesRepository
from services.memory.personal.domain import MAX_INSTRUCTION_PAGES
from services.memory.personal.models import PersonalSettings
from services.memory.personal.repository import PersonalSettingsRepository
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, QuotaExceeded
from services.shared.language import is_tag
from services.shared.pagination import by_offset, offset_token, page_request

# InstructionPageState of pages.proto.
INSTRUCTIONS_NONE = 1
INSTRUCTIONS_READABLE = 2
INSTRUCTIONS_UNREADABLE = 3


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


class InstructionPages:
    def __init__(
        self,
        repository: PagesRepository,
        access: PageAccess,
        pages: Pages,
        settings_repository: PersonalSettingsRepository,
    ) -> None:
        self._repo = repository
        self._access = access
        self._pages = pages
        self._settings = settings_repository

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

    async def create_instruction_page(
        self, user_id: str, request_id: str, template_id: str, title: str, language: str = ""
    ) -> tuple[PageView, InstructionList]:
        """A private copy of the template (by default the default template of
        ``language``), added to the caller's instruction pages and made
        active. A retry (same request_id) finds the page made the first time
        and finishes the settings update if it was interrupted."""
        if not is_tag(language):
            raise InvalidArgument("language must be a BCP 47 language tag (e.g. en, fr)", field="language")
        template = templates.template(template_id, language)
        current = await self._instruction_list(user_id)
        if len(current.page_ids) >= MAX_INSTRUCTION_PAGES:
            raise QuotaExceeded(
                f"at most {MAX_INSTRUCTION_PAGES} instruction pages", field="instruction_page_ids"
            )
        view = await self._pages.create_page(
            user_id, request_id, title.strip() or template.title, template.body
        )
        page_id = view.page.id
        if page_id in current.page_ids:
            return view, current  # a retry of a request that had finished
        return view, await self._save_instruction_list(user_id, [*current.page_ids, page_id], page_id)

    async def add_instruction_page(self, user_id: str, page_id: str, make_active: bool) -> InstructionList:
        page_id = clean_id(page_id, "page_id")
        await self._access.readable(user_id, page_id)
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
            if await self._access.readable_or_none(user_id, page_id) is None:
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
        roles = await self._access.roles(user_id, list(pages.values()))
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
        page = await self._access.readable_or_none(user_id, current.active_page_id)
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


def _listed(settings: PersonalSettings | None) -> InstructionList:
    """The instruction pages a settings row lists (none without a row)."""
    if settings is None:
        return InstructionList([], "")
    ids = [str(page) for page in json.loads(settings.instruction_page_ids_json or "[]")]
    return InstructionList(ids, settings.active_instruction_page_id)
