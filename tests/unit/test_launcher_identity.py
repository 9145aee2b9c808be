"""The local launcher gives its five processes one identity key: the one
its environment sets, else a new one per start."""

from __future__ import annotations

from pathlib import Path

from services.launcher import DEFAULT_PORTS, PROCESSES, identity_env, plan
from services.shared.identity_tokens import parse_keys


def test_without_a_key_around_it_each_start_makes_a_new_one_shared_by_every_process(tmp_path: Path) -> None:
    first, second = identity_env({}), identity_env({})
    key = first["SWITCHBOARD_IDENTITY_KEY"]
    assert parse_keys(key) == [key]  # long enough to be accepted
    assert key != second["SWITCHBOARD_IDENTITY_KEY"]
    children = plan(dict(DEFAULT_PORTS), tmp_path, first)
    assert {child.name for child in children} == set(PROCESSES)
    assert {child.env["SWITCHBOARD_IDENTITY_KEY"] for child in children} == {key}


def test_a_key_set_around_it_is_kept() -> None:
    assert identity_env({"SWITCHBOARD_IDENTITY_KEY": "x" * 32}) == {}
    assert identity_env({"SWITCHBOARD_IDENTITY_KEY_FILE": "/run/secrets/identity-key"}) == {}
