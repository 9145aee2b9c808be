"""The gateway's JSON names of proto enums come from the enums themselves
(services.shared.enums.EnumNames): every name a request body accepts is a
value of its enum, so a body the schema lets through is never sent as
UNSPECIFIED by mistake, and a value added to a .proto is known at once."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from gateway import schemas
from gateway.enums import (
    AUTO_USE,
    BUSY_POLICIES,
    CHAT_MODES,
    DIFF_LINE_KINDS,
    INJECTION_STRATEGIES,
    NOTE_KINDS,
    PROPOSAL_STATES,
    ROLES,
    UNSPECIFIED,
    json_name,
)
from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_service_pb2
from switchboard.memory.v1 import memory_pb2, pages_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_pb2


def literal_names(annotation: Any) -> set[str]:
    """The strings of a ``Literal[...]`` (or ``Literal[...] | None``)."""
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return {name for arg in typing.get_args(annotation) for name in literal_names(arg)}


@pytest.mark.parametrize(
    ("names", "annotation"),
    [
        (BUSY_POLICIES, schemas.MessageBody.model_fields["busy_policy"].annotation),
        (BUSY_POLICIES, schemas.AskBody.model_fields["busy_policy"].annotation),
        (AUTO_USE, schemas.EnablementBody.model_fields["auto_use"].annotation),
        (CHAT_MODES, schemas.PersonalSettingsBody.model_fields["chat_mode"].annotation),
        (NOTE_KINDS, schemas.NoteKindName),
    ],
)
def test_every_name_a_body_accepts_is_a_value_of_its_enum(names: EnumNames[Any], annotation: Any) -> None:
    accepted = literal_names(annotation)
    assert accepted and accepted == set(names.names)
    assert all(names.number(name) != 0 for name in accepted)


def test_an_agents_injection_strategy_takes_every_value_and_the_providers_own() -> None:
    """ "unspecified" (the provider's own strategy) is accepted too: what a
    response shows can be sent back, and it is how a strategy is unset."""
    for annotation in (
        schemas.CreateAgentBody.model_fields["injection_strategy"].annotation,
        schemas.UpdateAgentBody.model_fields["injection_strategy"].annotation,
    ):
        assert literal_names(annotation) == {UNSPECIFIED, *INJECTION_STRATEGIES.names}
    assert INJECTION_STRATEGIES.number(UNSPECIFIED) == threads_pb2.INJECTION_STRATEGY_UNSPECIFIED
    assert INJECTION_STRATEGIES.number("convention_file") == threads_pb2.INJECTION_STRATEGY_CONVENTION_FILE


def test_names_map_both_ways() -> None:
    assert BUSY_POLICIES.number("interrupt") == engine_service_pb2.BUSY_POLICY_INTERRUPT
    assert AUTO_USE.number("off") == router_service_pb2.AUTO_USE_OVERRIDE_OFF
    assert AUTO_USE.number("") == router_service_pb2.AUTO_USE_OVERRIDE_UNSPECIFIED
    assert NOTE_KINDS.number("feature_summary") == memory_pb2.NOTE_KIND_FEATURE_SUMMARY
    assert CHAT_MODES.name(memory_pb2.CHAT_MODE_FLOATING, "sidebar") == "floating"
    assert CHAT_MODES.name(memory_pb2.CHAT_MODE_UNSPECIFIED, "sidebar") == "sidebar"
    assert PROPOSAL_STATES.number("") == pages_pb2.PROPOSAL_STATE_UNSPECIFIED
    assert PROPOSAL_STATES.number("refused") == pages_pb2.PROPOSAL_STATE_REFUSED
    assert ROLES.name(threads_pb2.ROLE_ASSISTANT) == "assistant"
    # A response names UNSPECIFIED, and a value newer than this gateway, "unspecified".
    assert json_name(DIFF_LINE_KINDS, pages_pb2.DIFF_LINE_KIND_ADDED) == "added"
    assert json_name(DIFF_LINE_KINDS, 0) == json_name(DIFF_LINE_KINDS, 99) == "unspecified"
