"""OpenAI's conversations over Switchboard's: `/v1/conversations` and their
items. `conv_<id>` is the Switchboard conversation `<id>` (the web page's,
the HTTP API's), owned by the caller: another user's, like a missing one,
is 404. Its items are its entries (gateway.openai_compat.items); a response
that names the conversation appends to it (responses_api).

What the conversation cannot do is refused, never faked: an item is never
deleted (the entries are the run records' history: 400), system and
developer items are refused (a run's instructions are its request's), and
DELETE archives the conversation, which then leaves this API (404)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import grpc
from fastapi import APIRouter, Path, Query, Request
from google.protobuf.field_mask_pb2 import FieldMask
from pydantic import BaseModel, ConfigDict, Field

from gateway import deps, params, responses
from gateway.api import check_message
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.openai_compat.conversation import append_turns
from gateway.openai_compat.errors import OpenAIError, OpenAIRoute, refusal
from gateway.openai_compat.items import InputItem, entry_items, item_text, read_item_id
from gateway.openai_compat.items import ItemId as ItemRef
from gateway.openai_compat.response_bodies import (
    ConversationItem,
    ConversationItems,
    DeletedConversation,
    OpenConversation,
)
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = APIRouter(
    prefix="/v1", route_class=OpenAIRoute, tags=["openai"], responses=responses.OPENAI_ERROR_RESPONSES
)
CONVERSATION_PREFIX = "conv_"
CONVERSATION_ID = r"^conv_[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
# Items one create may add, as OpenAI's API bounds them.
MAX_NEW_ITEMS = 20
MAX_PAGE = 100

# Any id the API takes: one without the conv_ prefix names no conversation (404).
ConversationId = Annotated[str, Path(pattern=params.ID_PATTERN, max_length=params.ID_MAX + 5)]
ItemId = Annotated[str, Path(pattern=params.ID_PATTERN, max_length=params.ID_MAX + 10)]
Metadata = Annotated[dict[str, str], Field(max_length=16)]


def conversation_id(switchboard_id: str) -> str:
    return CONVERSATION_PREFIX + switchboard_id


def _not_found(switchboard_id: str) -> OpenAIError:
    # The threads service's own words, so a missing and a foreign id read the same.
    return OpenAIError(404, "not_found", f"conversation {switchboard_id!r} not found")


async def open_conversation(request: Request, user: str, conv_id: str) -> threads_pb2.Conversation:
    """The caller's live conversation ``conv_id`` names; 404 for another
    user's, a missing or an archived (deleted) one."""
    if not conv_id.startswith(CONVERSATION_PREFIX):
        raise _not_found(conv_id)
    found: threads_service_pb2.GetConversationResponse = await rpc(
        request,
        deps.threads(request).GetConversation,
        threads_service_pb2.GetConversationRequest(conversation_id=conv_id.removeprefix(CONVERSATION_PREFIX)),
        user,
    )
    if found.conversation.archived:
        raise _not_found(found.conversation.id)
    return found.conversation


def _shown(conversation: threads_pb2.Conversation) -> OpenConversation:
    return OpenConversation(
        id=conversation_id(conversation.id),
        object="conversation",
        created_at=conversation.create_time.seconds,
        metadata=dict(conversation.metadata),
    )


class NewItems(BaseModel):
    model_config = ConfigDict(extra="allow")

    items: list[InputItem] = Field(min_length=1, max_length=MAX_NEW_ITEMS)


class NewConversation(BaseModel):
    model_config = ConfigDict(extra="allow")

    items: list[InputItem] = Field(default=[], max_length=MAX_NEW_ITEMS)
    metadata: Metadata | None = None


class ConversationUpdate(BaseModel):
    model_config = ConfigDict(extra="allow")

    metadata: Metadata


def _turns(request: Request, items: Sequence[InputItem]) -> list[tuple[str, str]]:
    """The items as turns to append, every one checked before anything is written."""
    turns: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        param = f"items[{index}]"
        if item.role not in ("user", "assistant"):
            refused = (
                f"{item.role} items are not kept in a conversation: give instructions with each "
                "response (its instructions field)"
            )
            raise OpenAIError(400, "unsupported_role", refused, f"{param}.role")
        text = item_text(item, param)
        try:
            check_message(request, text)
        except ApiError as error:
            raise refusal(error, f"{param}.content", {}) from error
        turns.append((item.role, text))
    return turns


def _page(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """A page as ConversationItems (each item with its type's fields only)."""
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


async def _append(request: Request, user: str, conversation: str, turns: list[tuple[str, str]]) -> list[Any]:
    entries = await append_turns(request, user, conversation, turns, str(uuid.uuid4()))
    return [item for entry in entries for item in entry_items(entry)]


@router.post("/conversations", response_model=OpenConversation)
async def create_conversation(body: NewConversation, request: Request, user: User) -> OpenConversation:
    """A new conversation of the caller's, with its first items."""
    turns = _turns(request, body.items)
    created: threads_service_pb2.CreateConversationResponse = await rpc(
        request,
        deps.threads(request).CreateConversation,
        threads_service_pb2.CreateConversationRequest(
            request_id=str(uuid.uuid4()), metadata=body.metadata or {}
        ),
        user,
    )
    if turns:
        await _append(request, user, created.conversation.id, turns)
    return _shown(created.conversation)


@router.get("/conversations/{conv_id}", response_model=OpenConversation)
async def get_conversation(conv_id: ConversationId, request: Request, user: User) -> OpenConversation:
    """One of the caller's conversations."""
    return _shown(await open_conversation(request, user, conv_id))


@router.post("/conversations/{conv_id}", response_model=OpenConversation)
async def update_conversation(
    conv_id: ConversationId, body: ConversationUpdate, request: Request, user: User
) -> OpenConversation:
    """Replaces the conversation's metadata."""
    conversation = await open_conversation(request, user, conv_id)
    updated: threads_service_pb2.UpdateConversationResponse = await rpc(
        request,
        deps.threads(request).UpdateConversation,
        threads_service_pb2.UpdateConversationRequest(
            conversation=threads_pb2.Conversation(id=conversation.id, metadata=body.metadata),
            update_mask=FieldMask(paths=["metadata"]),
        ),
        user,
    )
    return _shown(updated.conversation)


@router.delete("/conversations/{conv_id}", response_model=DeletedConversation)
async def delete_conversation(conv_id: ConversationId, request: Request, user: User) -> DeletedConversation:
    """Archives the conversation: it leaves this API (404 afterwards) and the
    web page's list; the retention setting deletes archived conversations."""
    conversation = await open_conversation(request, user, conv_id)
    await rpc(
        request,
        deps.threads(request).ArchiveConversation,
        threads_service_pb2.ArchiveConversationRequest(conversation_id=conversation.id),
        user,
    )
    return DeletedConversation(
        id=conversation_id(conversation.id), object="conversation.deleted", deleted=True
    )


async def _entries(
    request: Request,
    user: str,
    conversation: str,
    descending: bool,
    size: int,
    token: str,
    start: ItemRef | None,
) -> threads_service_pb2.ListEntriesResponse:
    """A page of the conversation's entries, the first from the entry of ``start``."""
    try:
        listed = await deps.conversation_entries(
            request,
            user,
            conversation,
            descending=descending,
            page_size=size,
            page_token=token,
            start_entry_id=start.entry_id if start else "",
        )
    except grpc.aio.AioRpcError as error:
        if start and error.code() == grpc.StatusCode.NOT_FOUND:
            raise OpenAIError(404, "not_found", f"item {start.item_id!r} not found") from error
        raise
    return listed


@router.get(
    "/conversations/{conv_id}/items", response_model=ConversationItems, response_model_exclude_unset=True
)
async def list_items(
    conv_id: ConversationId,
    request: Request,
    user: User,
    after: Annotated[str | None, Query(max_length=params.ID_MAX + 10, pattern=params.ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    order: Literal["asc", "desc"] = "desc",
) -> dict[str, Any]:
    """A page of the conversation's items, newest first unless `order=asc`,
    after the item `after` names (the `last_id` of the page before)."""
    conversation = await open_conversation(request, user, conv_id)
    cursor = read_item_id(after) if after else None
    if after and cursor is None:
        raise OpenAIError(404, "not_found", f"item {after!r} not found", "after")
    descending, skipping = order == "desc", after
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        listed = await _entries(request, user, conversation.id, descending, limit + 1, token, cursor)
        for entry in listed.entries:
            for item in entry_items(entry)[:: -1 if descending else 1]:
                if skipping is None:
                    items.append(item)
                elif item["id"] == skipping:
                    skipping = None  # the page starts after it
        if skipping is not None:
            raise OpenAIError(404, "not_found", f"item {after!r} not found", "after")
        token = listed.next_page_token
        if len(items) > limit or not token:
            return _page(items[:limit], len(items) > limit)


@router.post(
    "/conversations/{conv_id}/items", response_model=ConversationItems, response_model_exclude_unset=True
)
async def create_items(
    conv_id: ConversationId, body: NewItems, request: Request, user: User
) -> dict[str, Any]:
    """Adds user and assistant messages at the end of the conversation: the
    next response's model sees them as history."""
    conversation = await open_conversation(request, user, conv_id)
    turns = _turns(request, body.items)
    return _page(await _append(request, user, conversation.id, turns), False)


async def _item(request: Request, user: str, conv_id: str, item_id: str) -> dict[str, Any]:
    conversation = await open_conversation(request, user, conv_id)
    wanted = read_item_id(item_id)
    if wanted is not None:
        listed = await _entries(request, user, conversation.id, False, 1, "", wanted)
        for item in entry_items(listed.entries[0]) if listed.entries else []:
            if item["id"] == item_id:
                return item
    raise OpenAIError(404, "not_found", f"item {item_id!r} not found")


@router.get(
    "/conversations/{conv_id}/items/{item_id}",
    response_model=ConversationItem,
    response_model_exclude_unset=True,
)
async def get_item(conv_id: ConversationId, item_id: ItemId, request: Request, user: User) -> dict[str, Any]:
    """One item of the conversation."""
    return await _item(request, user, conv_id, item_id)


# Out of /openapi.json: it never succeeds (docs/api.md lists it).
@router.delete("/conversations/{conv_id}/items/{item_id}", include_in_schema=False)
async def delete_item(conv_id: ConversationId, item_id: ItemId, request: Request, user: User) -> None:
    """Refused (400 unsupported_operation) for an item that exists: a
    conversation's entries are append-only, the history its runs were
    given."""
    await _item(request, user, conv_id, item_id)
    refused = (
        "items cannot be deleted: a conversation is append-only, the history its runs were given; "
        "delete the conversation instead"
    )
    raise OpenAIError(400, "unsupported_operation", refused, "item_id")
