"""Switchboard's MCP tools and resources, defined once for both transports.
(No postponed annotations here: the SDK reads each tool's annotations, and
review_note_proposal's resolver is a local of build_server.)

``build_server(api_for)`` returns an MCPServer whose every tool and resource
reaches Switchboard through ``api_for(ctx)``: an :class:`client.api.Api` on
the public HTTP API with the caller's token. The stdio server
(``switchboard mcp``) gives one over the network; the gateway's /mcp gives
one per request, in-process, with the token that request presented. So the
two transports apply the same authentication, validation and per-user
isolation: the API's.

A refusal is a tool error (``isError``) whose text is the API's error body
(``{"error": {"code", "message", "reason", "status"}}``): an unknown agent
or another user's object is NOT_FOUND, bad arguments INVALID_ARGUMENT (or
PAYLOAD_TOO_LARGE), exactly as over HTTP. Arguments of the wrong type are
refused by the SDK against each tool's input schema. For a resource, an
object that is missing (or another user's) is the protocol's not-found
error (-32602), any other refusal a resource error carrying the same body.

``save_note`` applies the write guard the engine's tools apply (services.shared.write_guard)
before anything is written: the note is saved only when the user's own
message (``request``, quoted word for word) asks to save or remember, and
holds no word that message does not."""

import json
from collections.abc import Callable
from contextlib import aclosing
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from client.api import Api, ApiRefusal, segment
from client.events import describe
from client.messages import say
from client.settings import PROJECT_PATTERN
from services.shared.write_guard import asks_to_save, check_write

ApiFor = Callable[[Context], Api]

INSTRUCTIONS = (
    "Switchboard runs the project's agents. Ask another agent with ask_agent (its answer lands on "
    "that agent's shared thread, with you as the requester); read an agent's thread with read_thread; "
    "say what you are doing with set_live_state. Save a durable note only when the user asked for it, "
    "in the user's own words (save_note). Notes, recall and live state belong to a project: "
    "list_projects gives yours and your role; omit project_id for this server's project. Notes agents "
    "propose wait for a member's review (list_note_proposals; editors accept_note_proposal or "
    "refuse_note_proposal). / "
    "Switchboard fait tourner les agents du projet : ask_agent pose une question à un autre agent, "
    "read_thread lit son fil, save_note enregistre une note quand l'utilisateur l'a demandé, avec "
    "ses mots ; notes, rappel et état en direct appartiennent à un projet (list_projects) ; les notes "
    "proposées par les agents attendent la relecture d'un membre (list_note_proposals)."
)

AgentId = Annotated[str, Field(description="an agent's id, as list_agents gives it (e.g. architect)")]
ProjectId = Annotated[
    str,
    Field(
        description="the project, as list_projects gives it (its id); '' = this server's project "
        "(SWITCHBOARD_PROJECT for `switchboard mcp`), else your personal project",
        max_length=128,
        pattern=PROJECT_PATTERN,
    ),
]
NoteKind = Literal["decision", "feature_summary", "preference", "fact"]
# Hints for the client (which calls to confirm): reads change nothing; an ask
# and a note add to a thread or to memory, refusing a note proposal decides
# it; a live state replaces the last one.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
REPLACES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Accepting a note proposal may rewrite the note it targets.
ACCEPTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
ProposalId = Annotated[
    str,
    Field(description="a note proposal's id, as list_note_proposals gives it", min_length=1, max_length=128),
]
ProposalState = Literal["", "pending", "accepted", "refused"]
# The MCP revision whose results can ask the client for input (input_required).
INPUT_REQUIRED_SINCE = "2026-07-28"


class Unaskable(BaseModel):
    """No way to ask this client: a 2025-era request over stateless HTTP."""


class Decision(BaseModel):
    """What a review asks the user: accept the proposed note, or refuse it."""

    decision: Literal["accept", "refuse"] = Field(description="accept writes the note; refuse writes nothing")


def tool_error(refusal: ApiRefusal) -> ToolError:
    """The API's error body; a 403 also carries ``hint``: what the user can
    do (an admin token, or membership of the agent), in the user's language."""
    body = refusal.as_dict()
    if refusal.status == 403:
        body = {"error": {**refusal.as_dict()["error"], "hint": say("forbidden")}}  # type: ignore[dict-item]
    return ToolError(json.dumps(body, ensure_ascii=False))


def build_server(api_for: ApiFor) -> MCPServer:
    server = MCPServer("switchboard", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")

    async def call(ctx: Context, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return await api_for(ctx).call(method, path, **kwargs)
        except ApiRefusal as refusal:
            raise tool_error(refusal) from None

    def project_of(ctx: Context, project_id: str) -> dict[str, str]:
        """The ``project_id`` query of a project-scoped route: the call's, else the server's."""
        chosen = project_id or api_for(ctx).project
        return {"project_id": chosen} if chosen else {}

    @server.tool(annotations=READ_ONLY)
    async def list_projects(ctx: Context) -> dict[str, Any]:
        """Your projects (the personal one first): id, display name, your role (viewer reads;
        editor also writes notes and live state; owner also manages members), note policy."""
        projects: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await call(ctx, "GET", "/projects", params={"page_size": 500, "page_token": token})
            projects.extend(page.get("projects", []))
            token = page.get("next_page_token", "")
            if not token:
                return {"projects": projects}

    @server.tool(annotations=READ_ONLY)
    async def list_agents(ctx: Context) -> dict[str, Any]:
        """The project's agents: id, display name, persona, provider and model."""
        agents: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await call(ctx, "GET", "/agents", params={"page_size": 500, "page_token": token})
            agents.extend(page.get("agents", []))
            token = page.get("next_page_token", "")
            if not token:
                return {"agents": agents}

    @server.tool(annotations=WRITES)
    async def ask_agent(
        target: AgentId,
        message: Annotated[str, Field(description="the question or request, in the user's language")],
        ctx: Context,
        correlation_id: Annotated[
            str, Field(description="ties the answer to this question; '' = the run's id")
        ] = "",
        requester: Annotated[
            str, Field(description="who asks: your agent id; '' = this server's agent, else 'user'")
        ] = "",
    ) -> dict[str, Any]:
        """Asks another agent and waits for its answer. The question and the answer land on the
        target's one shared thread, with the requester and the correlation id; the run's steps
        arrive as progress notifications."""
        api = api_for(ctx)
        body = {
            "message": message,
            "requester": requester or api.agent or "user",
            "correlation_id": correlation_id,
        }
        answer: dict[str, Any] = {}
        count = 0
        try:
            # Closed here even when an error event ends the loop early: the
            # run's stream is released in this task, not by the garbage collector.
            async with aclosing(api.stream(f"/agents/{segment(target)}/asks", body)) as events:
                async for event in events:
                    count += 1
                    note = describe(event)
                    if note is not None:
                        await ctx.report_progress(count, message=note)
                    if event.kind == "error":
                        # The run started, then failed: its error event's code and message.
                        error = {"reason": "", **event.data}
                        raise ToolError(json.dumps({"error": error}, ensure_ascii=False))
                    if event.kind == "final":
                        answer = event.data
        except ApiRefusal as refusal:
            raise tool_error(refusal) from None
        if not answer:
            raise ToolError(
                json.dumps({"error": {"code": "UNAVAILABLE", "message": "the run ended without an answer"}})
            )
        run_id = str(answer.get("run_id", ""))
        return {
            "answer": answer.get("text", ""),
            "status": answer.get("status", ""),
            "target": target,
            "requester": body["requester"],
            "correlation_id": correlation_id or run_id,
            "run_id": run_id,
        }

    @server.tool(annotations=READ_ONLY)
    async def read_thread(
        agent: AgentId,
        ctx: Context,
        requester: Annotated[str, Field(description="only this requester's exchanges with the agent")] = "",
        correlation_id: Annotated[str, Field(description="only this question and its answers")] = "",
        descending: bool = False,
        page_size: Annotated[int, Field(description="entries per page (at most 500)")] = 100,
        page_token: str = "",
    ) -> dict[str, Any]:
        """An agent's shared thread: all of it (view "full"), one requester's exchanges with it
        ("pair") or one question and its answers ("correlation"). A pair or correlation view is a
        filter of the thread: partial_view says the thread holds more than it shows."""
        view = "pair" if requester else "correlation" if correlation_id else "full"
        params = {
            "requester": requester,
            "correlation_id": correlation_id,
            "descending": descending,
            "page_size": page_size,
            "page_token": page_token,
        }
        data = await call(ctx, "GET", f"/agents/{segment(agent)}/entries", params=params)
        return {"view": view, **data}

    @server.tool(annotations=WRITES)
    async def save_note(
        title: Annotated[str, Field(description="a short title")],
        body: Annotated[str, Field(description="the note itself")],
        request: Annotated[
            str,
            Field(
                description="the user's own message that asks to save or remember this, word for word; "
                "the note may only hold words of that message"
            ),
        ],
        ctx: Context,
        kind: NoteKind = "fact",
        tags: list[str] | None = None,
        project_id: ProjectId = "",
    ) -> dict[str, Any]:
        """Saves a durable note (a decision, a preference, a fact...) in a project, for every
        later run there, when the user asked for it; a note repeating an existing one is merged
        into it. Needs the editor role in a shared project."""
        tags = tags or []
        refusal = check_write(
            "save_note", request, asked=asks_to_save(request), texts=[title, body, *tags], what="save a note"
        )
        if refusal is not None:
            error = {"code": "PERMISSION_DENIED", "message": refusal.for_model, "reason": "WRITE_REFUSED"}
            raise ToolError(json.dumps({"error": {**error, "status": 403}}, ensure_ascii=False))
        note = {"kind": kind, "title": title, "body": body, "tags": tags}
        return await call(ctx, "POST", "/notes", body=note, params=project_of(ctx, project_id))

    @server.tool(annotations=READ_ONLY)
    async def recall(
        query: Annotated[str, Field(description="what to look for, in words or by meaning")],
        ctx: Context,
        project_id: ProjectId = "",
    ) -> dict[str, Any]:
        """The durable notes of a project that a run asking this would recall, best first, each
        with its score."""
        if not query.strip():
            raise tool_error(ApiRefusal(400, "INVALID_ARGUMENT", "query must not be blank"))
        return await call(ctx, "GET", "/notes", params={"q": query, **project_of(ctx, project_id)})

    @server.tool(annotations=READ_ONLY)
    async def list_note_proposals(
        ctx: Context,
        project_id: ProjectId = "",
        state: Annotated[ProposalState, Field(description="only this state; '' = every state")] = "",
    ) -> dict[str, Any]:
        """The notes agents proposed for a project's memory, newest first: each with the proposed
        note, the reason, the note it would update (target_note, or null for a new note) and the
        diff. Pending ones wait for an editor or owner to accept or refuse them."""
        proposals: list[dict[str, Any]] = []
        token = ""
        params = {**project_of(ctx, project_id), **({"state": state} if state else {})}
        while True:
            page = await call(
                ctx, "GET", "/note-proposals", params={**params, "page_size": 500, "page_token": token}
            )
            proposals.extend(page.get("proposals", []))
            token = page.get("next_page_token", "")
            if not token:
                return {"proposals": proposals}

    @server.tool(annotations=ACCEPTS)
    async def accept_note_proposal(id: ProposalId, ctx: Context) -> dict[str, Any]:
        """Accepts a pending note proposal: its note is written into the project's memory, or the
        note it targets is updated with it. Needs the editor or owner role; a proposal decided
        already, or whose target note changed since, is refused (FAILED_PRECONDITION)."""
        return await call(ctx, "POST", f"/note-proposals/{segment(id)}/accept")

    @server.tool(annotations=WRITES)
    async def refuse_note_proposal(id: ProposalId, ctx: Context) -> dict[str, Any]:
        """Refuses a pending note proposal: nothing is written. Needs the editor or owner role."""
        return await call(ctx, "POST", f"/note-proposals/{segment(id)}/refuse")

    async def ask_decision(id: ProposalId, ctx: Context) -> Elicit[Decision] | Unaskable:
        """The question a review asks: the proposal with its diff, accept or refuse."""
        era = ctx.protocol_version or ""
        if era < INPUT_REQUIRED_SINCE and not ctx.session.can_send_request:
            return Unaskable()
        proposal = await call(ctx, "GET", f"/note-proposals/{segment(id)}")
        note, diff = proposal.get("note", {}), proposal.get("diff", {}).get("unified", "")
        question = (
            f"{note.get('title', '')}\n{note.get('body', '')}\n\n{diff}\n"
            f"Accept or refuse? / Accepter ou refuser ? ({proposal.get('reason', '')})"
        )
        return Elicit(question, Decision)

    @server.tool(annotations=ACCEPTS)
    async def review_note_proposal(
        id: ProposalId,
        ctx: Context,
        decision: Annotated[ElicitationResult[Decision], Resolve(ask_decision)],
    ) -> dict[str, Any]:
        """Shows a pending note proposal (its note and diff) to the user and asks them to accept or
        refuse it (an input_required round at 2026-07-28, an elicitation before), then records the
        decision. A user who declines to answer leaves it pending. Needs the editor or owner role."""
        # A resolver's plain value arrives as an accepted outcome holding it.
        if isinstance(decision, AcceptedElicitation) and isinstance(decision.data, Unaskable):
            # Before input_required, asking needs a channel back to the client,
            # which stateless Streamable HTTP does not keep open.
            refused = (
                f"this connection ({ctx.protocol_version}, stateless HTTP) cannot ask the user: connect with "
                f"MCP {INPUT_REQUIRED_SINCE}, or decide with accept_note_proposal or refuse_note_proposal"
            )
            error = {"code": "FAILED_PRECONDITION", "reason": "", "message": refused}
            raise ToolError(json.dumps({"error": error}))
        if not isinstance(decision, AcceptedElicitation):
            return {"id": id, "decided": False, "state": "pending"}
        verb = "accept" if decision.data.decision == "accept" else "refuse"
        decided = await call(ctx, "POST", f"/note-proposals/{segment(id)}/{verb}")
        return {"id": id, "decided": True, "state": decided["proposal"]["state"], **decided}

    @server.tool(annotations=REPLACES)
    async def set_live_state(
        agent: AgentId,
        activity: Annotated[str, Field(description="what the agent is doing now, in a few words")],
        ctx: Context,
        detail: str = "",
        ttl_seconds: Annotated[
            float | None, Field(description="seconds until it expires; omitted: the default")
        ] = None,
        project_id: ProjectId = "",
    ) -> dict[str, Any]:
        """Says what an agent is doing now in a project, for every agent's next run there, until
        it expires. Needs the editor role in a shared project."""
        body: dict[str, Any] = {"activity": activity, "detail": detail}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        return await call(
            ctx, "PUT", f"/live-state/{segment(agent)}", body=body, params=project_of(ctx, project_id)
        )

    @server.tool(annotations=READ_ONLY)
    async def live_state(ctx: Context, project_id: ProjectId = "") -> dict[str, Any]:
        """Who is doing what now in a project: every unexpired live-state entry, with its expiry."""
        return await call(ctx, "GET", "/live-state", params={"page_size": 500, **project_of(ctx, project_id)})

    @server.tool(annotations=READ_ONLY)
    async def run_status(run_id: str, ctx: Context) -> dict[str, Any]:
        """One run's record: status, model, skills, sources read, usage, error."""
        return await call(ctx, "GET", f"/runs/{segment(run_id)}")

    async def read(ctx: Context, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return await api_for(ctx).call("GET", path, params=params)
        except ApiRefusal as refusal:
            text = json.dumps(refusal.as_dict(), ensure_ascii=False)
            raise (ResourceNotFoundError(text) if refusal.status == 404 else ResourceError(text)) from None

    @server.resource(
        "switchboard://projects/{project_id}/context",
        name="project_context",
        description="The project context every agent's run in the project receives (CONTEXT.md); "
        "project 'default' or 'personal' is your personal project.",
        mime_type="text/markdown",
    )
    async def project_context(project_id: str, ctx: Context) -> str:
        params = {"project_id": "" if project_id == "default" else project_id}
        data = await read(ctx, "/project-context", params)
        return str(data.get("body", ""))

    @server.resource(
        "switchboard://agents/{agent_id}/handoff",
        name="agent_handoff",
        description="An agent's latest handoff summary: what its thread's closed segments hand on.",
        mime_type="text/markdown",
    )
    async def agent_handoff(agent_id: str, ctx: Context) -> str:
        summary, token = "", ""
        while True:
            page = await read(
                ctx, f"/agents/{segment(agent_id)}/segments", {"page_size": 500, "page_token": token}
            )
            for item in page.get("segments", []):
                if item.get("handoff_state") == "ready" and item.get("handoff_summary"):
                    summary = str(item["handoff_summary"])
            token = page.get("next_page_token", "")
            if not token:
                return summary

    @server.resource(
        "switchboard://runs/{run_id}",
        name="run",
        description="A run's record (JSON): status, model, layers, skills, sources, usage.",
        mime_type="application/json",
    )
    async def run_record(run_id: str, ctx: Context) -> str:
        return json.dumps(await read(ctx, f"/runs/{segment(run_id)}"), ensure_ascii=False)

    return server
