"""Who may do what with an agent. An agent belongs to a project: the
project's members read its thread (viewers and up) and ask it (editors and
up), and so do the agent's own members (its owner included: a grant of its
own, which is what keeps existing agents usable, since they moved into their
owner's personal project, which has no other member). Only its owner or an
admin changes it or its members. The agents of personal projects form the
registry every user sees, and a refusal there is PERMISSION_DENIED with the
reason; an agent of a shared project is NOT_FOUND to whoever is neither a
member of the project nor of the agent, exactly like a missing one.

Project membership lives in the memory service (ProjectsService, the one
source of truth); it is consulted in one place, ``_project_role``, once per
access decision at most, never cached, and only for a caller who is neither a
service nor a member of the agent (nor the owner of the agent's project when
it is the caller's own personal project).

Agents registered before agents had owners have owner "": the next user to
use one (ask it, read it, change it) becomes its owner, and the agent moves
into that user's personal project, so an upgraded workspace keeps working
for the people who use each agent. An admin does not claim: managing an
agent is not using it. No gRPC here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from services.shared.audit import Actor, new_event
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from services.shared.projects import (
    PERSONAL_PREFIX,
    PROJECT_ID,
    ProjectRole,
    is_personal_name,
    personal_project_id,
    role_phrase,
)
from services.threads.models import Agent, Thread, ThreadsAuditEvent
from services.threads.owners import ThreadOwner, ThreadOwners
from services.threads.repository import ThreadsRepository

# Callers acting for several users (the engine's provider-session store, the
# threads service's own handoff calls) are not users: no membership applies.
SERVICE_PREFIX = "service:"


# What each use of an agent needs of a member of its project.
READ = ProjectRole.VIEWER  # its thread, views, segments, sessions, export, members
ASK = ProjectRole.EDITOR  # writes to its thread: asks, answers, sessions, imports


@dataclass(frozen=True)
class ProjectGrant:
    """The caller's access to a project, as memory resolved it."""

    project_id: str
    role: ProjectRole


class ProjectDirectory(Protocol):
    """Who is a member of which project (memory's ProjectsService).
    ``check`` acts with ``actor``'s identity; None when the actor is not a
    member (or the project does not exist: the two are never told apart).
    DependencyUnavailable when it cannot be asked."""

    async def check(self, actor: Actor, project_id: str) -> ProjectGrant | None: ...


def is_service(actor: Actor) -> bool:
    return actor.user.startswith(SERVICE_PREFIX)


def is_shared(agent: Agent) -> bool:
    """Whether the agent belongs to a shared project (not a personal one)."""
    return bool(agent.project_id) and not agent.project_id.startswith(PERSONAL_PREFIX)


class AgentAccess:
    def __init__(
        self,
        repository: ThreadsRepository,
        owners: ThreadOwners | None = None,
        projects: ProjectDirectory | None = None,
    ) -> None:
        self._repo = repository
        self.owners = owners if owners is not None else ThreadOwners(repository.threads.thread_owner)
        # None: no memory service configured; only agent members have access.
        self._projects = projects

    async def visible_agent(self, actor: Actor, agent_id: str) -> Agent:
        """The agent, when ``actor`` may know it exists (see ``visible``);
        NOT_FOUND otherwise, exactly as for an unknown id."""
        agent = await self._repo.agents.get_agent(agent_id) if agent_id else None
        if agent is None or not await self.visible(actor, agent):
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        return agent

    async def visible(self, actor: Actor, agent: Agent, roles: dict[str, ProjectRole] | None = None) -> bool:
        """Whether ``actor`` may know the agent exists. The agents of personal
        projects form the registry every user sees (as before projects); an
        agent of a shared project is its project's: a user who is neither a
        member of that project nor of the agent finds it missing. Services
        and admins see every agent. ``roles`` caches project roles over one
        listing."""
        if not is_shared(agent) or actor.is_admin or is_service(actor):
            return True
        if roles is not None and agent.project_id in roles:
            role = roles[agent.project_id]
        else:
            role = await self._project_role(actor, agent)
            if roles is not None:
                roles[agent.project_id] = role
        return role >= READ or await self._repo.registry.is_member(agent.id, actor.user)

    async def agent(self, actor: Actor, agent_id: str) -> Agent:
        """The agent, claimed by ``actor`` (a user, not an admin) when it has
        no owner yet; NOT_FOUND for an unknown id, and for an agent of a
        shared project the actor is no member of (nor of the agent)."""
        agent = await self._claimed(actor, agent_id)
        if is_shared(agent) and not await self.visible(actor, agent):
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        return agent

    async def _claimed(self, actor: Actor, agent_id: str) -> Agent:
        agent = await self._repo.agents.get_agent(agent_id) if agent_id else None
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        if agent.owner_id or actor.is_admin or is_service(actor):
            return agent
        audit = new_event(ThreadsAuditEvent, actor, "agent.claim", agent_id, "first user since owners exist")
        await self._repo.registry.claim_agent(agent_id, actor.user, personal_project_id(actor.user), audit)
        claimed = await self._repo.agents.get_agent(agent_id)
        assert claimed is not None
        return claimed

    async def require_member(self, actor: Actor, agent_id: str, need: ProjectRole = ASK) -> Agent:
        """The agent, when ``actor`` may use it as ``need`` says (READ its
        thread, ASK it): a service, a member of the agent, or a member of
        its project with that role; NOT_FOUND for an agent of a shared
        project the actor is in no way a member of."""
        agent = await self._claimed(actor, agent_id)
        if is_service(actor) or await self._repo.registry.is_member(agent_id, actor.user):
            return agent
        role = await self._project_role(actor, agent)
        if role >= need:
            return agent
        if role >= READ:
            raise PermissionDenied(
                f"{actor.user} is {role_phrase(role)} of project {agent.project_id!r}: viewers read "
                f"agent {agent_id!r}'s thread, editors and owners ask it; ask a project owner "
                "to make you an editor",
                agent_id=agent_id,
                project_id=agent.project_id,
            )
        if is_shared(agent) and not actor.is_admin:
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        raise PermissionDenied(
            f"{actor.user} is not a member of agent {agent_id!r}: ask its owner ({agent.owner_id}) "
            "or an admin to add you",
            agent_id=agent_id,
        )

    async def _project_role(self, actor: Actor, agent: Agent) -> ProjectRole:
        """The caller's role in the agent's project. This is the one place the
        threads service consults project membership (one call to memory, for
        a caller who is neither a service nor a member of the agent); nothing
        is cached, so a membership change takes effect at the next call."""
        if not agent.project_id:
            return ProjectRole.NONE
        if agent.project_id == personal_project_id(actor.user):
            return ProjectRole.OWNER  # the caller's own personal project: no one to ask
        if self._projects is None:
            return ProjectRole.NONE
        grant = await self._projects.check(actor, agent.project_id)
        return grant.role if grant is not None else ProjectRole.NONE

    async def project_for_new_agent(self, actor: Actor, project_id: str) -> str:
        """The project an agent ``actor`` creates goes into: ``project_id``
        ("", "default", "personal": the caller's personal project), which the
        caller must be an editor or owner of. A service names it as it is."""
        project_id = project_id.strip()
        if is_personal_name(project_id):
            return personal_project_id(actor.user)
        if not PROJECT_ID.match(project_id):
            raise InvalidArgument(
                "agent.project_id must be 1 to 128 letters, digits, '.', '_' or '-'",
                field="agent.project_id",
            )
        if project_id == personal_project_id(actor.user) or is_service(actor):
            return project_id
        if self._projects is None:
            raise FailedPrecondition(
                "this threads service has no memory service to check project membership with: "
                "agents go into their creator's personal project only",
                project_id=project_id,
            )
        grant = await self._projects.check(actor, project_id)
        if grant is None:
            raise NotFound(f"project {project_id!r} not found", project_id=project_id)
        if grant.role < ASK:
            raise PermissionDenied(
                f"{actor.user} is {role_phrase(grant.role)} of project {project_id!r}: creating "
                "its agents is for its editors and owners",
                project_id=project_id,
            )
        return grant.project_id

    async def require_thread_member(
        self, actor: Actor, thread: Thread | ThreadOwner, need: ProjectRole = ASK
    ) -> None:
        """For an agent thread, the caller must be a member of its agent or
        of its agent's project (``need``)."""
        if thread.kind == "agent" and thread.agent_id:
            await self.require_member(actor, thread.agent_id, need)

    async def require_thread_id_member(self, actor: Actor, thread_id: str, need: ProjectRole = ASK) -> None:
        """Like require_thread_member, by id; an unknown thread is left to
        the call's own NOT_FOUND."""
        thread = await self.owners.get(thread_id) if thread_id else None
        if thread is not None:
            await self.require_thread_member(actor, thread, need)

    async def require_member_if_registered(self, actor: Actor, agent_id: str) -> None:
        """For a write that registers the agent when it is missing (an import)."""
        if await self._repo.agents.get_agent(agent_id) is not None:
            await self.require_member(actor, agent_id, ASK)

    async def require_manager(self, actor: Actor, agent_id: str, what: str) -> Agent:
        """Changing the agent or its members: its owner or an admin."""
        agent = await self.agent(actor, agent_id)
        if actor.is_admin or agent.owner_id == actor.user:
            return agent
        raise PermissionDenied(
            f"{what} of agent {agent_id!r} is for its owner ({agent.owner_id}) or an admin",
            agent_id=agent_id,
        )
