"""The hashed tokens file, the admin command, and bearer auth over it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.auth import COOKIE
from gateway.settings import GatewaySettings
from gateway.tokens import (
    TokenFile,
    audit_path,
    create_token,
    hash_token,
    read_audit,
    read_records,
    revoke_token,
    set_role,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_created_token_is_stored_only_as_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    record, token = create_token(path, "alice", "laptop")
    second, other = create_token(path, "alice")
    assert token != other and token.startswith("sb_") and len(token) > 40
    text = path.read_text()
    assert token not in text and other not in text
    assert record.sha256 == hash_token(token) and record.sha256 in text
    assert [(r.id, r.user, r.label) for r in read_records(path)] == [
        (record.id, "alice", "laptop"),
        (second.id, "alice", ""),
    ]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    tokens = TokenFile(path)
    assert tokens.user_for("anything") is None  # no file yet
    record, token = create_token(path, "bob")
    assert tokens.user_for(token) == "bob"
    assert tokens.user_for(token + "x") is None and tokens.user_for("") is None
    assert revoke_token(path, record.id) and not revoke_token(path, record.id)
    assert tokens.user_for(token) is None


@pytest.mark.parametrize("user", ["", "a b", "a:b", "a,b", "x" * 129])
def test_bad_user_names_are_refused(tmp_path: Path, user: str) -> None:
    with pytest.raises(ValueError, match="user must be"):
        create_token(tmp_path / "tokens.json", user)


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SWITCHBOARD_GATEWAY_TOKENS_FILE"}
    return subprocess.run(
        [sys.executable, "-m", "gateway", "tokens", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_the_admin_command_creates_lists_and_revokes(tmp_path: Path) -> None:
    path = str(tmp_path / "tokens.json")
    created = admin("--file", path, "create", "--user", "carol", "--label", "ci")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("sb_") and "not shown again" in created.stderr
    listed = admin("--file", path, "list")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["user"], r["label"]) for r in rows] == [("carol", "ci")] and token not in listed.stdout
    assert "sha256" not in rows[0]
    assert admin("--file", path, "revoke", rows[0]["id"]).returncode == 0
    assert admin("--file", path, "revoke", rows[0]["id"]).returncode == 1
    assert admin("--file", path, "list").stdout == ""
    assert admin("create", "--user", "carol").returncode == 2  # no file named anywhere


async def test_env_and_file_tokens_are_both_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _, token = create_token(path, "dave")
    app = create_app(GatewaySettings(tokens="env-token:erin", tokens_file=path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        # /suggested-actions needs no service: it shows who is let in.
        url = "/api/agent/suggested-actions"
        assert (await client.get(url)).status_code == 401
        assert (await client.get(url, headers={"Authorization": "Bearer nope"})).status_code == 401
        assert (await client.get(url, headers={"Authorization": f"Basic {token}"})).status_code == 401
        for bearer in (token, "env-token"):
            assert (await client.get(url, headers={"Authorization": f"Bearer {bearer}"})).status_code == 200
        # The page link: a valid token becomes a SameSite=Strict HttpOnly cookie.
        assert (await client.get("/?token=nope")).status_code == 401
        link = await client.get(f"/?token={token}")
        assert link.status_code == 303 and link.headers["location"] == "/"
        cookie = link.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert client.cookies[COOKIE] == token
        assert (await client.get(url)).status_code == 200  # the cookie the link set
        # An Authorization header wins over the cookie.
        bad = await client.get(url, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        body = bad.json()
        assert body == {
            "error": {"code": "UNAUTHENTICATED", "message": body["error"]["message"], "reason": ""}
        }


async def test_without_tokens_every_request_is_the_dev_user() -> None:
    app = create_app(GatewaySettings(tokens=""))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/api/agent/suggested-actions")).status_code == 200


def test_tokens_carry_a_role_and_old_records_are_users(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    # A file written before roles existed: records without a role.
    old = {"id": "old", "user": "olga", "sha256": hash_token("sb_old"), "label": "", "create_time": "2026"}
    path.write_text(json.dumps({"tokens": [old]}))
    tokens = TokenFile(path)
    assert tokens.identity_for("sb_old") == ("olga", "user")
    record, token = create_token(path, "ada", role="admin", actor="ops")
    assert tokens.identity_for(token) == ("ada", "admin") and record.public()["role"] == "admin"
    with pytest.raises(ValueError, match="role must be"):
        create_token(path, "x", role="root")
    changed = set_role(path, "old", "admin", actor="ops")
    assert changed is not None and tokens.identity_for("sb_old") == ("olga", "admin")
    assert set_role(path, "nobody", "user") is None
    assert revoke_token(path, record.id, actor="ops")
    # Every change is in the audit file beside the tokens file, oldest first.
    events = read_audit(path)
    assert [(e["actor"], e["action"], e["target"]) for e in events] == [
        ("ops", "token.create", record.id),
        ("ops", "token.role", "old"),
        ("ops", "token.revoke", record.id),
    ]
    assert events[1]["detail"] == "user=olga role=user->admin"
    assert all(e["actor_role"] == "admin" and e["create_time"] and e["id"] for e in events)
    assert oct(audit_path(path).stat().st_mode & 0o777) == "0o600"
    # A torn last line (a crash mid-append) is skipped, not an error.
    with audit_path(path).open("a") as handle:
        handle.write('{"id": "torn"')
    assert len(read_audit(path)) == 3


def test_the_admin_command_sets_roles(tmp_path: Path) -> None:
    path = str(tmp_path / "tokens.json")
    created = admin("--file", path, "create", "--user", "carol", "--role", "admin")
    assert created.returncode == 0 and "(admin)" in created.stderr, created.stderr
    row = json.loads(admin("--file", path, "list").stdout)
    assert row["role"] == "admin"
    assert admin("--file", path, "role", row["id"], "user").returncode == 0
    assert json.loads(admin("--file", path, "list").stdout)["role"] == "user"
    assert admin("--file", path, "role", "nobody", "user").returncode == 1
    assert admin("--file", path, "create", "--user", "x", "--role", "root").returncode == 2
    assert [e["action"] for e in read_audit(Path(path))] == ["token.create", "token.role"]


def test_env_tokens_name_a_role() -> None:
    settings = GatewaySettings(tokens="t1:alice,t2:root:admin,t3:eve:superuser, :nobody,t4:")
    assert settings.token_map() == {"t1": ("alice", "user"), "t2": ("root", "admin"), "t3": ("eve", "user")}


async def test_me_says_the_role_and_the_audit_log_refuses_users(tmp_path: Path) -> None:
    app = create_app(GatewaySettings(tokens="t-user:ursula,t-admin:ada:admin"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        me = await client.get("/api/agent/me", headers={"Authorization": "Bearer t-user"})
        assert me.json() == {"user": "ursula", "role": "user"}
        me = await client.get("/api/agent/me", headers={"Authorization": "Bearer t-admin"})
        assert me.json() == {"user": "ada", "role": "admin"}
        # Refused by the gateway itself, before any service is called.
        refused = await client.get("/api/audit", headers={"Authorization": "Bearer t-user"})
        assert refused.status_code == 403
        assert refused.json()["error"]["reason"] == "ERROR_REASON_PERMISSION_DENIED"
    # Without tokens (the local launcher) the one dev user is an admin.
    app = create_app(GatewaySettings(tokens=""))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert (await client.get("/api/agent/me")).json() == {"user": "local", "role": "admin"}
