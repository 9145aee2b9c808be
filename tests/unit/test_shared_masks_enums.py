"""Update masks and proto enum names, read one way by every service."""

from __future__ import annotations

import pytest

from services.shared.enums import EnumNames
from services.shared.errors import InvalidArgument
from services.shared.masks import masked_fields
from switchboard.engine.v1 import engine_service_pb2
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2


def test_a_mask_names_updatable_fields_once_each_in_order() -> None:
    assert masked_fields(["title", "pinned", "title"], ("title", "pinned", "body")) == ["title", "pinned"]


@pytest.mark.parametrize("paths", [[], ["title", "id"], ["create_time"]])
def test_an_empty_mask_or_a_read_only_field_is_invalid_argument(paths: list[str]) -> None:
    with pytest.raises(InvalidArgument) as error:
        masked_fields(paths, {"title", "pinned"})
    assert error.value.metadata == {"field": "update_mask"}


def test_enum_short_names_both_ways() -> None:
    roles = EnumNames(threads_pb2.Role)
    assert roles.names == ("user", "assistant", "system", "tool")
    assert roles.number("tool") == threads_pb2.ROLE_TOOL and roles.name(threads_pb2.ROLE_USER) == "user"
    assert roles.number("nobody") == threads_pb2.ROLE_UNSPECIFIED and roles.name(0, "?") == "?"
    assert roles.name(99, "99") == "99" and 99 not in roles and 0 in roles and 4 in roles


def test_enum_aliases_and_separators() -> None:
    states = EnumNames(threads_pb2.HandoffState, aliases={"none": "not_due"})
    assert states.number("none") == threads_pb2.HANDOFF_STATE_NOT_DUE and states.names == (
        "none",
        "pending",
        "ready",
    )
    branches = EnumNames(router_pb2.RouteBranch, separator="-")
    assert branches.number("grey-llm") == router_pb2.ROUTE_BRANCH_GREY_LLM
    policies = EnumNames(engine_service_pb2.BusyPolicy)
    assert policies.name(engine_service_pb2.BUSY_POLICY_INTERRUPT) == "interrupt"
