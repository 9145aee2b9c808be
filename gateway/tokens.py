"""Bearer tokens kept hashed in a JSON file. `python -m gateway tokens create
--user alice [--role admin]` prints a new random token once and stores only
its SHA-256 and its role (admin or user; a record without one is a user's);
the gateway re-reads the file when it changes, so a created or revoked token,
or a changed role, takes effect without a restart.

Every change (token.create, token.revoke, token.role) is appended to an audit
file beside the tokens file (``<tokens file>.audit.jsonl``), under the same
lock: the gateway owns no database, and the tokens file is the state these
actions change. GET /api/audit shows it with the services' audit logs."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import getpass
import hashlib
import json
import os
import secrets
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gateway.settings import GatewaySettings

TOKEN_PREFIX = "sb_"
ROLES = ("admin", "user")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenRecord:
    id: str
    user: str
    sha256: str
    label: str
    create_time: str
    role: str = "user"

    def public(self) -> dict[str, str]:
        """What `tokens list` shows: never the hash."""
        return {
            "id": self.id,
            "user": self.user,
            "role": self.role,
            "label": self.label,
            "create_time": self.create_time,
        }


def read_records(path: Path) -> list[TokenRecord]:
    if not path.exists():
        return []
    data = json.loads(path.read_text() or "{}")
    return [TokenRecord(**item) for item in data.get("tokens", [])]


def _write_records(path: Path, records: list[TokenRecord]) -> None:
    # Written whole to a temporary file then renamed: a reader never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    payload = {"tokens": [r.__dict__ for r in records]}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle, indent=2)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialises admin commands changing the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def validate_user(user: str) -> str:
    user = user.strip()
    if not user or len(user) > 128 or any(c.isspace() or c in ",:" for c in user):
        raise ValueError("user must be 1 to 128 characters without spaces, ',' or ':'")
    return user


def validate_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    return role


def audit_path(path: Path) -> Path:
    return path.with_name(path.name + ".audit.jsonl")


def _audit(path: Path, actor: str, action: str, target: str, detail: str) -> None:
    """Appends one event (the caller holds the lock): the AuditEvent fields."""
    event = {
        "id": str(uuid.uuid4()),
        "actor": actor,
        "actor_role": "admin",  # whoever can write the tokens file administers the gateway
        "action": action,
        "target": target,
        "detail": detail,
        "create_time": datetime.now(UTC).isoformat(),
    }
    fd = os.open(audit_path(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write(json.dumps(event) + "\n")


def read_audit(path: Path) -> list[dict[str, str]]:
    """The audit events of the tokens file, oldest first (a torn last line,
    from a crash mid-write, is skipped)."""
    try:
        lines = audit_path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def operator() -> str:
    """Who runs the admin command: the account of the shell it runs in."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def create_token(
    path: Path, user: str, label: str = "", role: str = "user", actor: str = ""
) -> tuple[TokenRecord, str]:
    """A new token for ``user`` with ``role``: the record stored, and the
    token itself (shown once; only its hash is kept)."""
    user = validate_user(user)
    role = validate_role(role)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = TokenRecord(
        id=secrets.token_hex(6),
        user=user,
        sha256=hash_token(token),
        label=label.strip()[:200],
        create_time=datetime.now(UTC).isoformat(timespec="seconds"),
        role=role,
    )
    with _locked(path):
        _write_records(path, [*read_records(path), record])
        _audit(path, actor or operator(), "token.create", record.id, f"user={user} role={role}")
    return record, token


def revoke_token(path: Path, token_id: str, actor: str = "") -> bool:
    with _locked(path):
        records = read_records(path)
        kept = [r for r in records if r.id != token_id]
        if len(kept) == len(records):
            return False
        _write_records(path, kept)
        gone = next(r for r in records if r.id == token_id)
        _audit(path, actor or operator(), "token.revoke", token_id, f"user={gone.user} role={gone.role}")
    return True


def set_role(path: Path, token_id: str, role: str, actor: str = "") -> TokenRecord | None:
    """Changes a token's role; None when no token has this id."""
    role = validate_role(role)
    with _locked(path):
        records = read_records(path)
        found = next((r for r in records if r.id == token_id), None)
        if found is None:
            return None
        changed = dataclasses.replace(found, role=role)
        _write_records(path, [changed if r.id == token_id else r for r in records])
        detail = f"user={found.user} role={found.role}->{role}"
        _audit(path, actor or operator(), "token.role", token_id, detail)
    return changed


class TokenFile:
    """The gateway's view of the file: hash -> (user, role), reloaded when the
    file's modification time or size changes (one stat per request)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, tuple[str, str]] = {}

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._users = None, {}
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._users = {r.sha256: (r.user, r.role) for r in read_records(self.path)}
            self._stamp = stamp

    def identity_for(self, token: str) -> tuple[str, str] | None:
        """(user, role) of a token, None for an unknown one."""
        if not token:
            return None
        self._reload()
        return self._users.get(hash_token(token))

    def user_for(self, token: str) -> str | None:
        identity = self.identity_for(token)
        return identity[0] if identity else None


def main(argv: list[str]) -> int:
    """`python -m gateway tokens create|list|revoke`."""
    parser = argparse.ArgumentParser(prog="python -m gateway tokens", description=__doc__)
    parser.add_argument("--file", type=Path, help="tokens file (default: SWITCHBOARD_GATEWAY_TOKENS_FILE)")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a token for a user and print it once")
    create.add_argument("--user", required=True)
    create.add_argument("--label", default="", help="a note: who or what uses the token")
    create.add_argument("--role", choices=ROLES, default="user", help="admin or user (default)")
    commands.add_parser("list", help="list tokens (ids, users, roles, labels; never the tokens)")
    revoke = commands.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id")
    role = commands.add_parser("role", help="change the role of a token")
    role.add_argument("token_id")
    role.add_argument("role", choices=ROLES)
    args = parser.parse_args(argv)
    path: Path | None = args.file or GatewaySettings().tokens_file
    if path is None:
        parser.error("give --file or set SWITCHBOARD_GATEWAY_TOKENS_FILE")
    if args.command == "create":
        try:
            record, token = create_token(path, args.user, args.label, args.role)
        except ValueError as error:
            parser.error(str(error))
        print(token)
        print(
            f"token {record.id} for {record.user} ({record.role}) stored in {path}; it is not shown again",
            file=sys.stderr,
        )
        return 0
    if args.command == "role":
        changed = set_role(path, args.token_id, args.role)
        if changed is None:
            print(f"no token {args.token_id} in {path}", file=sys.stderr)
            return 1
        print(f"token {changed.id} of {changed.user} now has the role {changed.role}", file=sys.stderr)
        return 0
    if args.command == "list":
        for record in read_records(path):
            print(json.dumps(record.public()))
        return 0
    if revoke_token(path, args.token_id):
        print(f"token {args.token_id} revoked", file=sys.stderr)
        return 0
    print(f"no token {args.token_id} in {path}", file=sys.stderr)
    return 1
