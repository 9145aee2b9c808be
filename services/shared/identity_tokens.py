"""Signed identity tokens: who a gRPC call acts for, as a short-lived JWT.

The gateway mints one for the user of each HTTP request, and the engine,
threads and memory mint one for the calls they make on a user's behalf;
every service verifies it (services.shared.identity_guard). Without one, a
caller that can reach a service port could claim to be anyone.

HS256 with a shared secret, on purpose: four of the five processes mint
tokens on a user's behalf, so all of them would hold the signing key under an
asymmetric scheme too (only the router would be spared it), and an HMAC
is cheaper than an EdDSA/ES256 signature on the hot path (tokens are also
cached: minted once per user for half their lifetime, verified once per
process). The key is therefore a secret of every
process alike (docs/security.md). PyJWT, maintained and already the
ecosystem's default, does the encoding and the signature; the times are
checked here against the process's injectable clock (services.shared.time),
so tests move time instead of waiting for it.

Rotation: the configured keys are whitespace-separated; the first signs and
every one of them verifies, so a new key is rolled out as the second one
first, then promoted, then the old one removed."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import jwt

from services.shared.errors import Unauthenticated
from services.shared.time import utcnow

ALGORITHM = "HS256"
ISSUER = "switchboard"
AUDIENCE = "switchboard-services"
DEFAULT_ROLE = "user"
# HS256 keys shorter than its 256-bit hash output weaken it (RFC 7518 §3.2).
MIN_KEY_CHARS = 32
# Verified tokens remembered per process, so that the interceptor and the
# servicer's caller_user() of one call, and the many calls one minted token
# serves, check the signature once.
_VERIFIED_CACHE_SIZE = 4096


class IdentityKeyError(ValueError):
    """The process has no usable identity key: it must not start."""


def parse_keys(secret: str = "", key_file: Path | None = None) -> list[str]:
    """The keys from the setting and from the file (whitespace-separated,
    the setting's first), the signing key first; IdentityKeyError names
    what is missing or too short."""
    keys = secret.split()
    if key_file is not None:
        try:
            keys += key_file.read_text(encoding="utf-8").split()
        except OSError as error:
            raise IdentityKeyError(f"cannot read the identity key file {key_file}: {error}") from error
    if not keys:
        raise IdentityKeyError(
            "no identity key: set SWITCHBOARD_IDENTITY_KEY or SWITCHBOARD_IDENTITY_KEY_FILE "
            "(the same secret in every process; `python -m services.launcher` makes one per start)"
        )
    short = [index for index, key in enumerate(keys) if len(key) < MIN_KEY_CHARS]
    if short:
        raise IdentityKeyError(
            f"identity key number {short[0] + 1} has fewer than {MIN_KEY_CHARS} characters; "
            "make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return keys


@dataclass(frozen=True)
class Caller:
    """What a verified token says: the user, the role, until when."""

    user: str
    role: str
    expires: float


class IdentityTokens:
    """Mints and verifies the tokens of one process with its keys."""

    def __init__(self, keys: list[str], lifetime: float = 60.0, leeway: float = 5.0) -> None:
        if not keys:
            raise IdentityKeyError("no identity key")
        if lifetime <= 0 or leeway < 0:
            raise IdentityKeyError("the identity token lifetime must be > 0 and its leeway >= 0")
        self._keys = list(keys)
        self._lifetime = lifetime
        self._leeway = leeway
        # (user, role) -> (token, issued at, the time after which a fresh one is minted)
        self._minted: dict[tuple[str, str], tuple[str, float, float]] = {}
        self._verified: OrderedDict[str, Caller] = OrderedDict()

    @property
    def lifetime(self) -> float:
        return self._lifetime

    @property
    def leeway(self) -> float:
        return self._leeway

    def mint(self, user: str, role: str = DEFAULT_ROLE) -> str:
        """A token for ``user``; the same one while more than half its
        lifetime is left (minting is on every call's path). A clock set back
        (a test's) gets a new one too: a token issued in the future is refused."""
        now = utcnow().timestamp()
        kept = self._minted.get((user, role))
        if kept is not None and kept[1] <= now < kept[2]:
            return kept[0]
        issued = int(now)
        claims = {
            "sub": user,
            "role": role,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": issued,
            "exp": issued + self._lifetime,
        }
        token = jwt.encode(claims, self._keys[0], algorithm=ALGORITHM)
        if len(self._minted) > _VERIFIED_CACHE_SIZE:
            self._minted.clear()  # a bound for a process acting for very many users
        self._minted[(user, role)] = (token, issued, issued + self._lifetime / 2)
        return token

    def verify(self, token: str) -> Caller:
        """The caller a token names; Unauthenticated when it is not one of
        ours (bad signature, wrong issuer or audience), expired or issued in
        the future (beyond the leeway), or lacks a user."""
        now = utcnow().timestamp()
        caller = self._verified.get(token)
        if caller is None:
            caller = self._check_signature(token)
            self._verified[token] = caller
            if len(self._verified) > _VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        if now > caller.expires + self._leeway:
            raise Unauthenticated("the identity token has expired")
        return caller

    def _check_signature(self, token: str) -> Caller:
        claims: dict[str, object] | None = None
        for key in self._keys:
            try:
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=[ALGORITHM],
                    audience=AUDIENCE,
                    issuer=ISSUER,
                    # Times are checked against the process's clock below and in verify().
                    options={"require": ["sub", "iat", "exp"], "verify_exp": False, "verify_iat": False},
                )
                break
            except jwt.InvalidSignatureError:
                continue
            except jwt.InvalidTokenError as error:
                raise Unauthenticated(f"the identity token is not valid: {error}") from error
        if claims is None:
            raise Unauthenticated("the identity token is not signed with this system's key")
        user, role, issued, expires = (
            claims["sub"],
            claims.get("role", DEFAULT_ROLE),
            claims["iat"],
            claims["exp"],
        )
        if not isinstance(user, str) or not user or not isinstance(role, str):
            raise Unauthenticated("the identity token names no user")
        if not isinstance(issued, int | float) or not isinstance(expires, int | float):
            raise Unauthenticated("the identity token's times are not numbers")
        if issued > utcnow().timestamp() + self._leeway:
            raise Unauthenticated("the identity token is issued in the future")
        return Caller(user, role or DEFAULT_ROLE, float(expires))


_current: IdentityTokens | None = None


def configure(tokens: IdentityTokens | None) -> None:
    """The process's tokens, set once at start-up from its settings (None:
    none, every mint and verification then fails)."""
    global _current
    _current = tokens


def current() -> IdentityTokens:
    if _current is None:
        raise IdentityKeyError(
            "this process has no identity key configured (services.shared.identity_tokens.configure)"
        )
    return _current
