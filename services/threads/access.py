"""Who may do what with an agent. The registry is visible to every user, but
only an agent's members (its owner included) ask it or read its thread, and
only its owner or an admin changes it or its members. A refusal is
PERMISSION_DENIED with the reason: the agent itself is no secret.

Agents registered before agents had owners have owner "": the next user to
use one (ask it, read it, change it) becomes its owner, so an upgraded
workspace keeps working for the people who use each agent. An admin does not
claim: managing an agent is not using it. No gRPC here."""

from __future__ import annotations

from services.shared.audit import Actor, new_event
from services.shared.errors import NotFound, PermissionDenied
from services.threads.models import Agent, Thread, ThreadsAuditEvent
from services.threads.owners import ThreadOwner, ThreadOwners
from services.threads.repository import ThreadsRepository

# Callers acting for several users (the engine's provider-session store, the
# threads service's own handoff calls) are not users: no membership applies.
SERVICE_PREFIX = "service:"


class AgentAccess:
    def __init__(self, repository: ThreadsRepository, owners: ThreadOwners | None = None) -> None:
        self._repo = repository
        self.owners = owners if owners is not None else ThreadOwners(repository.thread_owner)

    async def agent(self, actor: Actor, agent_id: str) -> Agent:
        """The agent, claimed by ``actor`` (a user, not an admin) when it has
        no owner yet; NOT_FOUND for an unknown id."""
        agent = await self._repo.get_agent(agent_id) if agent_id else None
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        if agent.owner_id or actor.is_admin or actor.user.startswith(SERVICE_PREFIX):
            return agent
        audit = new_event(ThreadsAuditEvent, actor, "agent.claim", agent_id, "first user since owners exist")
        await self._repo.claim_agent(agent_id, actor.user, audit)
        claimed = await self._repo.get_agent(agent_id)
        assert claimed is not None
        return claimed

    async def require_member(self, actor: Actor, agent_id: str) -> Agent:
        agent = await self.agent(actor, agent_id)
        if actor.user.startswith(SERVICE_PREFIX) or await self._repo.is_member(agent_id, actor.user):
            return agent
        raise PermissionDenied(
            f"{actor.user} is not a member of agent {agent_id!r}: ask its owner ({agent.owner_id}) "
            "or an admin to add you",
            agent_id=agent_id,
        )

    async def require_thread_member(self, actor: Actor, thread: Thread | ThreadOwner) -> None:
        """For an agent thread, the caller must be a member of its agent."""
        if thread.kind == "agent" and thread.agent_id:
            await self.require_member(actor, thread.agent_id)

    async def require_thread_id_member(self, actor: Actor, thread_id: str) -> None:
        """Like require_thread_member, by id; an unknown thread is left to
        the call's own NOT_FOUND."""
        thread = await self.owners.get(thread_id) if thread_id else None
        if thread is not None:
            await self.require_thread_member(actor, thread)

    async def require_member_if_registered(self, actor: Actor, agent_id: str) -> None:
        """For a write that registers the agent when it is missing (an import)."""
        if await self._repo.get_agent(agent_id) is not None:
            await self.require_member(actor, agent_id)

    async def require_manager(self, actor: Actor, agent_id: str, what: str) -> Agent:
        """Changing the agent or its members: its owner or an admin."""
        agent = await self.agent(actor, agent_id)
        if actor.is_admin or agent.owner_id == actor.user:
            return agent
        raise PermissionDenied(
            f"{what} of agent {agent_id!r} is for its owner ({agent.owner_id}) or an admin",
            agent_id=agent_id,
        )
