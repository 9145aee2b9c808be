"""The gateway routes that name a user's object, as the cross-user matrix
(tests/e2e/test_gateway_routes.py) calls them as another user, and the routes
that name an object shared by design. tests/unit/test_gateway_routes.py checks
against the app's OpenAPI that every route with an id in its path is in one of
the two."""

from __future__ import annotations

from typing import Any

# The matrix: (method, path template, body[, status]). {c} conversation,
# {r} run, {s} skill, {p} page, {q} proposal, {n} note, {v} version,
# {h} schedule, {j} a project of alice's that bob is no member of (a
# non-member is 404 exactly like for a missing project), {u} a member's user
# id (alice's, the same in both calls), {o} a note proposal of that
# project. Status 404 unless given.
MATRIX: list[tuple[Any, ...]] = [
    ("GET", "/api/agent/conversations/{c}", None),
    ("PATCH", "/api/agent/conversations/{c}", {"title": "mine now"}),
    (
        "PUT",
        "/api/agent/conversations/{c}/sources",
        {"workspace": False, "connectors": [], "mcp_servers": []},
    ),
    ("POST", "/api/agent/conversations/{c}/archive", None),
    ("GET", "/api/agent/conversations/{c}/entries", None),
    ("GET", "/api/agent/conversations/{c}/entries?descending=true", None),
    ("GET", "/api/agent/conversations/{c}/runs", None),
    ("POST", "/api/agent/conversations/{c}/messages", {"message": "hello"}),
    ("GET", "/api/agent/sources?conversation_id={c}", None),
    ("GET", "/api/agent/runs/{r}", None),
    ("GET", "/api/agent/runs/{r}/events", None),
    ("POST", "/api/agent/runs/{r}/cancel", None),
    ("POST", "/api/agent/runs/{r}/feedback", {"skill_id": "{s}"}),
    ("GET", "/api/agent/pages/{p}", None),
    ("GET", "/api/agent/pages/{p}/versions", None),
    ("POST", "/api/agent/personal-settings/instructions-page", {"page_id": "{p}"}),
    # Names a page of bob's own list: any page outside it is 409 "add it
    # first", alice's exactly like a missing one.
    ("PUT", "/api/agent/personal-settings/instructions-page/active", {"page_id": "{p}"}, 409),
    ("DELETE", "/api/agent/personal-settings/instruction-pages/{p}", None),
    ("GET", "/api/agent/proposals/{q}", None),
    ("POST", "/api/agent/proposals/{q}/accept", None),
    ("POST", "/api/agent/proposals/{q}/refuse", None),
    ("PATCH", "/api/agent/pages/{p}", {"body": "mine now"}),
    ("POST", "/api/agent/pages/{p}/versions/{v}/restore", None),
    ("GET", "/api/agent/notes/{n}", None),
    ("PATCH", "/api/agent/notes/{n}", {"title": "mine now"}),
    ("DELETE", "/api/agent/notes/{n}", None),
    ("GET", "/api/agent/runs/{r}/deliveries", None),
    ("GET", "/api/agent/conversations/{c}/webhook", None),
    ("PUT", "/api/agent/conversations/{c}/webhook", {"webhook_url": ""}),
    ("POST", "/api/schedules", {"cron": "0 9 * * *", "message": "mine now", "conversation_id": "{c}"}),
    ("GET", "/api/schedules/{h}", None),
    ("POST", "/api/schedules/{h}/pause", None),
    ("POST", "/api/schedules/{h}/resume", None),
    ("DELETE", "/api/schedules/{h}", None),
    ("PUT", "/api/agent/pages/{p}/acl", {"reader_user_ids": ["bob"]}),
    ("GET", "/api/agent/projects/{j}", None),
    ("PATCH", "/api/agent/projects/{j}", {"display_name": "mine now"}),
    ("GET", "/api/agent/projects/{j}/members", None),
    ("PUT", "/api/agent/projects/{j}/members/{u}", {"role": "owner"}),
    ("DELETE", "/api/agent/projects/{j}/members/{u}", None),
    # A project's memory, named by its id in the query.
    ("GET", "/api/agent/notes?project_id={j}", None),
    ("GET", "/api/agent/notes?project_id={j}&q=supplier", None),
    ("POST", "/api/agent/notes?project_id={j}", {"kind": "fact", "title": "Mine", "body": "Bob was here."}),
    ("GET", "/api/agent/project-context?project_id={j}", None),
    ("PUT", "/api/agent/project-context?project_id={j}", {"body": "Bob's rules."}),
    ("GET", "/api/agent/live-state?project_id={j}", None),
    ("PUT", "/api/agent/live-state/qa?project_id={j}", {"activity": "Bob was here"}),
    ("DELETE", "/api/agent/live-state/qa?project_id={j}", None),
    # A project's note proposals: listed by the project, named by their id.
    ("GET", "/api/agent/note-proposals?project_id={j}", None),
    ("GET", "/api/agent/note-proposals/{o}", None),
    ("POST", "/api/agent/note-proposals/{o}/accept", None),
    ("POST", "/api/agent/note-proposals/{o}/refuse", None),
]


# Routes that name an object shared by design, not per user. Those gated by
# role or membership are in ROLE_MATRIX below (403, never 404: the object is
# no secret, the function is not the caller's).
SHARED_ROUTES = {
    ("GET", "/api/agent/agents/{agent_id}"): "agents are the project's, shared",
    ("POST", "/api/agent/agents/{agent_id}/asks"): "the agent's one thread: its members (ROLE_MATRIX)",
    ("GET", "/api/agent/agents/{agent_id}/entries"): "the agent's one thread: its members (ROLE_MATRIX)",
    ("PATCH", "/api/agent/agents/{agent_id}"): "the registry: owner or admin (ROLE_MATRIX)",
    ("GET", "/api/agent/agents/{agent_id}/segments"): "the agent's one thread: its members (ROLE_MATRIX)",
    ("GET", "/api/agent/agents/{agent_id}/export"): "the agent's one thread: its members (ROLE_MATRIX)",
    ("GET", "/api/agent/agents/{agent_id}/members"): "members or admins (ROLE_MATRIX)",
    ("PUT", "/api/agent/agents/{agent_id}/members/{user_id}"): "owner or admin (ROLE_MATRIX)",
    ("DELETE", "/api/agent/agents/{agent_id}/members/{user_id}"): "owner or admin (ROLE_MATRIX)",
    ("PATCH", "/api/agent/skills/{skill_id}"): "the workspace catalog: admins (ROLE_MATRIX)",
    ("DELETE", "/api/agent/skills/{skill_id}"): "the workspace catalog: admins (ROLE_MATRIX)",
    ("PUT", "/api/agent/live-state/{agent_id}"): "an agent id within the caller's own live state",
    ("DELETE", "/api/agent/live-state/{agent_id}"): "an agent id within the caller's own live state",
    ("GET", "/api/agent/agents/{agent_id}/webhook"): "the caller's own default webhook for a shared agent",
    ("PUT", "/api/agent/agents/{agent_id}/webhook"): "the caller's own default webhook for a shared agent",
    ("PUT", "/api/agent/skills/{skill_id}/enablement"): "a workspace skill; sets the caller's enablement",
    ("GET", "/api/agent/skills/{skill_id}"): "a workspace skill, the same for every user but its enablement",
    ("GET", "/a2a/agents/{agent_id}/.well-known/agent-card.json"): "an agent card: its project's",
    ("POST", "/a2a/agents/{agent_id}"): "A2A: the project's agent, the caller's tasks",
}
# The /v1 routes that name a user's object: another user's is 404 exactly as a
# missing one, in OpenAI's error shape (tests/e2e/test_open_responses.py for
# responses, {r}; tests/e2e/test_open_conversations.py for conversations, {c},
# and their items, {i}).
OPENAI_MATRIX: list[tuple[Any, ...]] = [
    ("GET", "/v1/responses/resp_{r}", None),
    ("GET", "/v1/responses/resp_{r}?stream=true", None),
    ("POST", "/v1/responses/resp_{r}/cancel", None),
    ("GET", "/v1/conversations/conv_{c}", None),
    ("POST", "/v1/conversations/conv_{c}", {"metadata": {"owner": "bob"}}),
    ("DELETE", "/v1/conversations/conv_{c}", None),
    ("GET", "/v1/conversations/conv_{c}/items", None),
    ("GET", "/v1/conversations/conv_{c}/items?order=asc&limit=1", None),
    ("POST", "/v1/conversations/conv_{c}/items", {"items": [{"role": "user", "content": "mine now"}]}),
    ("GET", "/v1/conversations/conv_{c}/items/msg_{i}", None),
    ("DELETE", "/v1/conversations/conv_{c}/items/msg_{i}", None),
    ("POST", "/v1/responses", {"model": "recorded", "input": "mine now", "conversation": "conv_{c}"}),
]
PATH_IDS = {
    "resp_{r}": "{response_id}",
    "conv_{c}": "{conv_id}",
    "msg_{i}": "{item_id}",
    "{c}": "{conversation_id}",
    "{r}": "{run_id}",
    "{p}": "{page_id}",
    "{q}": "{proposal_id}",
    "{n}": "{note_id}",
    "{v}": "{version}",
    "{h}": "{schedule_id}",
    "{j}": "{project_id}",
    "{u}": "{user_id}",
    "{o}": "{proposal_id}",
}
