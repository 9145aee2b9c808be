"""Who may do what with what the engine attaches to an agent: its schedules
and its default webhook. An agent of a shared project is its project's, and
so is what is attached to it: the project's members see it (viewer and up),
its editors and owners change it. An agent of a personal project is part of
the registry every user sees (see services/threads/access.py), and what a
user attaches to it stays theirs alone, as before projects.

The agent is read as the caller, so the threads service refuses (NOT_FOUND)
whoever may not know it exists; the caller's role is asked of the memory
service's ProjectsService (the one source of truth), never cached. Used by
the schedules and by the webhook defaults; no gRPC here."""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.collaborators import Collaborators
from services.shared.errors import PermissionDenied
from services.shared.projects import PERSONAL_PREFIX, ProjectRole, role_phrase

NONE, VIEWER, EDITOR, OWNER = ProjectRole.NONE, ProjectRole.VIEWER, ProjectRole.EDITOR, ProjectRole.OWNER


def is_shared(project_id: str) -> bool:
    """Whether an agent's project is a shared one (not a personal project)."""
    return bool(project_id) and not project_id.startswith(PERSONAL_PREFIX)


@dataclass(frozen=True)
class AgentProject:
    """An agent as the caller sees it, with the caller's role in its project."""

    agent_id: str
    # The agent's shared project; "" when the agent is of a personal project.
    project_id: str
    # The caller's role in that project (NONE when not a member, or personal).
    role: int

    @property
    def shared(self) -> bool:
        return bool(self.project_id)


class AgentProjects:
    def __init__(self, collaborators: Collaborators) -> None:
        self._collab = collaborators

    async def project_of(self, user: str, agent_id: str) -> str:
        """The agent's shared project ("" for a personal project's agent),
        the agent read as ``user`` (NOT_FOUND when they may not know it)."""
        agent = await self._collab.get_agent(user, agent_id)
        return agent.project_id if is_shared(agent.project_id) else ""

    async def of(self, user: str, agent_id: str) -> AgentProject:
        """The agent and ``user``'s role in its shared project."""
        agent = await self._collab.get_agent(user, agent_id)
        if not is_shared(agent.project_id):
            return AgentProject(agent.id or agent_id, "", NONE)
        role = await self._collab.project_role(user, agent.project_id)
        return AgentProject(agent.id or agent_id, agent.project_id, role)


def require(user: str, access: AgentProject, needed: int, what: str) -> None:
    """PERMISSION_DENIED, with the reason, unless ``user``'s role in the
    agent's shared project is at least ``needed``. ``what`` names the act,
    e.g. "setting the agent's default webhook"."""
    if access.role >= needed:
        return
    if access.role == NONE:
        standing = f"{user} is not a member of project {access.project_id!r}"
    else:
        standing = f"{user} is {role_phrase(ProjectRole(access.role))} of project {access.project_id!r}"
    raise PermissionDenied(
        f"{standing}; {what} needs the {ProjectRole(needed).name.lower()} role",
        project_id=access.project_id,
        agent_id=access.agent_id,
    )
