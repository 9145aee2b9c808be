"""An agent's A2A agent card (the SDK's ``AgentCard``): its two bindings
(JSON-RPC at its own URL, gRPC with the agent as tenant), the caller's
enabled skills of the catalog, streaming and push notifications, the
resume-cursor extension, and the bearer scheme every call needs."""

from __future__ import annotations

from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from gateway.a2a.tasks import CURSOR_EXTENSION, CURSOR_PARAMETER, struct
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2

BEARER = "bearer"
TEXT = "text/plain"
AGENTS_PATH = "/a2a/agents"


def agent_url(base_url: str, agent_id: str) -> str:
    return f"{base_url.rstrip('/')}{AGENTS_PATH}/{agent_id}"


def agent_card(
    agent: threads_pb2.Agent,
    skills: list[router_pb2.Skill],
    base_url: str,
    grpc_address: str,
    version: str,
) -> a2a_pb2.AgentCard:
    """``grpc_address``: "" when the gRPC binding is not served."""
    interfaces = [
        a2a_pb2.AgentInterface(
            url=agent_url(base_url, agent.id),
            protocol_binding=TransportProtocol.JSONRPC.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        )
    ]
    if grpc_address:
        interfaces.append(
            a2a_pb2.AgentInterface(
                url=grpc_address,
                protocol_binding=TransportProtocol.GRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
                tenant=agent.id,
            )
        )
    card = a2a_pb2.AgentCard(
        name=agent.display_name or agent.id,
        description=agent.persona or f"The Switchboard agent {agent.id}.",
        supported_interfaces=interfaces,
        provider=a2a_pb2.AgentProvider(organization="Switchboard", url=base_url.rstrip("/")),
        version=version,
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=[
            a2a_pb2.AgentSkill(
                id=skill.name,
                name=skill.name,
                description=skill.description or skill.name,
                tags=["builtin" if skill.builtin else "catalog"],
            )
            for skill in skills
            if skill.enabled
        ],
    )
    card.capabilities.streaming = True
    card.capabilities.push_notifications = True
    card.capabilities.extensions.append(
        a2a_pb2.AgentExtension(
            uri=CURSOR_EXTENSION,
            description=(
                "Resume a task's stream with no gap and no duplicate: every event carries, in its "
                "metadata under this URI, the sequence number of the run event it came from; "
                f"SubscribeToTask with this extension activated and {CURSOR_PARAMETER} set to the "
                "last one seen sends only the events after it."
            ),
            required=False,
            params=struct({"cursor_parameter": CURSOR_PARAMETER, "metadata_key": CURSOR_EXTENSION}),
        )
    )
    card.security_schemes[BEARER].http_auth_security_scheme.CopyFrom(
        a2a_pb2.HTTPAuthSecurityScheme(
            scheme="Bearer", description="A Switchboard API token, as for every other route."
        )
    )
    requirement = card.security_requirements.add()
    requirement.schemes[BEARER].SetInParent()
    return card
