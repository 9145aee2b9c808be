"""Roles, agent members and the audit log."""

from __future__ import annotations

from pydantic import Field

from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    ProtoView,
)
from switchboard.common.v1 import common_pb2


# Roles, agent members and the audit log.
class Me(Body):
    """Who the request's token is."""

    user: str = Field(description="the user the token acts for")
    role: str = Field(description="admin or user: admins write the skill catalog and any agent")


class AgentMembers(Body):
    """Who may ask an agent and read its thread."""

    agent_id: str = Field(description="the agent")
    owner: str = Field(description="its owner (a member, who cannot be removed)")
    members: list[str] = Field(description="every member's user id, the owner first")


class AuditEvent(ProtoView, proto=common_pb2.AuditEvent):
    pass


class AuditPage(Body):
    """A page of the audit log, newest first: the skill catalog's, the
    agent registry's and the tokens file's events together."""

    events: list[AuditEvent] = Field(description="the events of this page, newest first")
    next_page_token: str = Field(description=NEXT_PAGE)
