"""Identity tokens (services/shared/identity_tokens.py): what one process
mints another accepts only with the same key, within its lifetime, from our
issuer for our audience; keys rotate by listing the new one next to the old."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from services.shared.errors import Unauthenticated
from services.shared.identity import IDENTITY_METADATA_KEY, caller_role, caller_user, user_metadata
from services.shared.identity_tokens import (
    ALGORITHM,
    AUDIENCE,
    ISSUER,
    IdentityKeyError,
    IdentityTokens,
    configure,
    current,
    parse_keys,
)
from services.shared.settings import SecuritySettings
from tests.conftest import MovableClock

KEY = "k" * 32
OTHER = "o" * 32


class Context:
    """The one method of a ServicerContext identity reads."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "sub": "alice",
        "role": "user",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 60,
        **changes,
    }


def test_a_token_names_its_user_and_role_for_a_process_with_the_same_key() -> None:
    token = IdentityTokens([KEY]).mint("alice", "admin")
    caller = IdentityTokens([KEY]).verify(token)
    assert (caller.user, caller.role) == ("alice", "admin")
    decoded = jwt.decode(token, KEY, algorithms=[ALGORITHM], audience=AUDIENCE, issuer=ISSUER)
    assert decoded["exp"] - decoded["iat"] == 60
    assert decoded["sub"] == "alice"


@pytest.mark.parametrize(
    ("case", "token"),
    [
        ("another key", jwt.encode(claims(), OTHER, algorithm=ALGORITHM)),
        ("unsigned", jwt.encode(claims(), None, algorithm="none")),
        ("another issuer", jwt.encode(claims(iss="elsewhere"), KEY, algorithm=ALGORITHM)),
        ("another audience", jwt.encode(claims(aud="someone-else"), KEY, algorithm=ALGORITHM)),
        ("no user", jwt.encode({k: v for k, v in claims().items() if k != "sub"}, KEY, algorithm=ALGORITHM)),
        ("an empty user", jwt.encode(claims(sub=""), KEY, algorithm=ALGORITHM)),
        (
            "no expiry",
            jwt.encode({k: v for k, v in claims().items() if k != "exp"}, KEY, algorithm=ALGORITHM),
        ),
        ("issued in the future", jwt.encode(claims(iat=int(time.time()) + 600), KEY, algorithm=ALGORITHM)),
        (
            "expired",
            jwt.encode(
                claims(iat=int(time.time()) - 600, exp=int(time.time()) - 540), KEY, algorithm=ALGORITHM
            ),
        ),
        ("not a token", "alice"),
        ("a truncated token", jwt.encode(claims(), KEY, algorithm=ALGORITHM)[:-5]),
    ],
)
def test_a_token_that_is_not_ours_or_not_valid_now_is_unauthenticated(case: str, token: str) -> None:
    with pytest.raises(Unauthenticated):
        IdentityTokens([KEY]).verify(token)


def test_a_token_lives_its_lifetime_plus_the_leeway_on_the_processs_clock(clock: MovableClock) -> None:
    tokens = IdentityTokens([KEY], lifetime=30, leeway=2)
    token = tokens.mint("alice")
    clock.advance(31)
    assert tokens.verify(token).user == "alice"  # within the leeway
    clock.advance(2)
    with pytest.raises(Unauthenticated, match="expired"):
        tokens.verify(token)


def test_the_token_of_a_user_is_reused_until_half_its_lifetime(clock: MovableClock) -> None:
    tokens = IdentityTokens([KEY], lifetime=60)
    first = tokens.mint("alice")
    assert tokens.mint("alice") == first
    assert tokens.mint("bob") != first
    assert tokens.mint("alice", "admin") != first
    clock.advance(31)
    renewed = tokens.mint("alice")
    assert renewed != first
    assert tokens.verify(renewed).user == "alice"


def test_rotation_the_first_key_signs_every_listed_key_verifies() -> None:
    old, new = IdentityTokens([OTHER]), IdentityTokens([KEY, OTHER])
    # During the rollout: processes with both keys accept the old processes' tokens...
    assert new.verify(old.mint("alice")).user == "alice"
    # ...and sign with the new key, which a process holding the old key alone refuses.
    with pytest.raises(Unauthenticated):
        old.verify(new.mint("alice"))
    # Once the old key is removed, its tokens are refused.
    with pytest.raises(Unauthenticated):
        IdentityTokens([KEY]).verify(old.mint("bob"))


def test_keys_come_from_the_setting_then_the_file(tmp_path: Path) -> None:
    file = tmp_path / "identity-key"
    file.write_text(f"{OTHER}\n")
    assert parse_keys(f"{KEY}  ", file) == [KEY, OTHER]
    assert parse_keys("", file) == [OTHER]
    settings = SecuritySettings(identity_key=KEY, identity_token_seconds=10)
    assert settings.identity_tokens().lifetime == 10


@pytest.mark.parametrize(
    ("secret", "file", "message"),
    [
        ("", None, "SWITCHBOARD_IDENTITY_KEY"),
        ("short", None, "fewer than 32"),
        ("", Path("/nonexistent/identity-key"), "cannot read"),
    ],
)
def test_no_usable_key_is_a_clear_start_up_error(secret: str, file: Path | None, message: str) -> None:
    with pytest.raises(IdentityKeyError, match=message):
        parse_keys(secret, file)


def test_caller_user_and_role_read_the_verified_token() -> None:
    kept = current()
    configure(IdentityTokens([KEY]))
    try:
        assert caller_user(Context(user_metadata("alice"))) == "alice"
        assert caller_role(Context(user_metadata("alice"))) == "user"
        assert caller_role(Context(user_metadata("root", role="admin"))) == "admin"
        for forged in ((("x-switchboard-user", "alice"),), ((IDENTITY_METADATA_KEY, "alice"),), ()):
            with pytest.raises(Unauthenticated):
                caller_user(Context(forged))
    finally:
        configure(kept)


def test_a_process_without_keys_mints_nothing() -> None:
    kept = current()
    configure(None)
    try:
        with pytest.raises(IdentityKeyError, match="no identity key"):
            user_metadata("alice")
    finally:
        configure(kept)


def test_a_clock_set_back_gets_a_token_issued_now_not_the_one_from_the_future(clock: MovableClock) -> None:
    tokens = IdentityTokens([KEY])
    clock.advance(3600)
    future = tokens.mint("alice")
    clock.advance(-3600)
    now = tokens.mint("alice")
    assert now != future
    assert tokens.verify(now).user == "alice"
