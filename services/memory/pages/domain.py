"""Rules of pages, instruction pages and proposals, composed for
PagesService. No gRPC here.

Access (services.memory.pages.access, one rule for every path): the owner
reads, edits, changes the ACL and decides proposals; editors (users, and the
editors of a project shared as editor) read and edit; readers (users, and
the members of a shared project) read. Each part holds one aggregate: pages
and their versions (:mod:`.pages`), the caller's instruction pages
(:mod:`.instructions`, from :mod:`.templates`) and proposals
(:mod:`.proposals`); they share one access rule and one write path."""

from __future__ import annotations

from services.memory.pages.access import PageAccess
from services.memory.pages.instructions import InstructionPages
from services.memory.pages.pages import Pages
from services.memory.pages.proposals import Proposals
from services.memory.pages.repository import PagesRepository
from services.memory.personal.repository import PersonalSettingsRepository
from services.memory.projects.domain import ProjectsDomain


class PagesDomain:
    def __init__(
        self,
        repository: PagesRepository,
        settings_repository: PersonalSettingsRepository,
        max_page_chars: int,
        max_pending_proposals: int,
        projects: ProjectsDomain,
    ) -> None:
        access = PageAccess(repository, projects)
        self.pages = Pages(repository, access, max_page_chars)
        self.instructions = InstructionPages(repository, access, self.pages, settings_repository)
        self.proposals = Proposals(repository, access, self.pages, max_pending_proposals)
