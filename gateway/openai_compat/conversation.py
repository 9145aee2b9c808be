"""The conversation a chat run goes to: the one the client names, whose
stored history the client's earlier messages must end (whitespace aside),
or a new one, seeded with those messages."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from fastapi import Request

from gateway import deps
from gateway.deps import rpc
from gateway.openai_compat.errors import OpenAIError, refusal
from gateway.openai_compat.exchange import Exchange
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

CONVERSATION_HEADER = "X-Switchboard-Conversation"
# Entries per AppendEntries call (the threads service's own limit).
SEED_BATCH = 100


def _same(text: str) -> str:
    return " ".join(text.split())


def answered(turns: Sequence[tuple[str, frozenset[str]]]) -> list[tuple[str, frozenset[str]]]:
    """Without the user messages that got no answer (the next message is not
    the assistant's): a failed or cancelled run's, kept by one side only."""
    return [
        (role, texts)
        for number, (role, texts) in enumerate(turns)
        if role != "user" or (number + 1 < len(turns) and turns[number + 1][0] == "assistant")
    ]


def stored_turns(entries: Sequence[threads_pb2.Entry]) -> list[tuple[str, frozenset[str]]]:
    """A conversation's entries (oldest first) as the texts a client may
    hold of each turn: the user's message, then the answer, which is all of
    the run's assistant text or its last message (tool calls and results
    are the run's own)."""
    turns: list[tuple[str, frozenset[str]]] = []
    answer: list[str] = []

    def close() -> None:
        if answer:
            turns.append(("assistant", frozenset({_same("".join(answer)), _same(answer[-1])})))
            answer.clear()

    for entry in entries:
        if entry.role == threads_pb2.ROLE_USER:
            close()
            turns.append(("user", frozenset({_same(entry.content)})))
        elif entry.role == threads_pb2.ROLE_ASSISTANT and entry.content:
            answer.append(entry.content)
    close()
    return answered(turns)


def history_matches(client: Sequence[tuple[str, str]], stored: Sequence[tuple[str, frozenset[str]]]) -> bool:
    """Whether the client's earlier messages are the latest turns of the
    stored conversation, in order, with the same text (whitespace aside).
    Unanswered user messages are left out on both sides, so a client may
    keep or drop a turn whose run failed. Sending only the new message
    always matches."""
    mine = answered([(role, frozenset({_same(text)})) for role, text in client])
    if len(mine) > len(stored):
        return False
    tail = stored[len(stored) - len(mine) :]
    pairs = zip(mine, tail, strict=True)
    return all(role == s_role and texts <= s_texts for (role, texts), (s_role, s_texts) in pairs)


async def _stored_tail(
    request: Request, user: str, conversation_id: str, wanted: int
) -> list[tuple[str, frozenset[str]]]:
    """The conversation's latest turns, read newest first until more than
    ``wanted`` are complete (the oldest page may begin inside a turn)."""
    entries: list[threads_pb2.Entry] = []
    token = ""
    while True:
        response = await deps.conversation_entries(
            request, user, conversation_id, descending=True, page_size=SEED_BATCH, page_token=token
        )
        entries += response.entries
        token = response.next_page_token
        turns = stored_turns(entries[::-1])
        if not token:
            return turns
        if len(turns) > wanted + 1:
            return turns[1:]


async def append_turns(
    request: Request, user: str, conversation_id: str, turns: Sequence[tuple[str, str]], request_id: str
) -> list[threads_pb2.Entry]:
    """Turns the client wrote (user messages, answers it had) added to the
    conversation as its own entries, so the next run sees them as history;
    idempotent on ``request_id``."""
    roles = {"user": threads_pb2.ROLE_USER, "assistant": threads_pb2.ROLE_ASSISTANT}
    appended: list[threads_pb2.Entry] = []
    for start in range(0, len(turns), SEED_BATCH):
        response: threads_service_pb2.AppendEntriesResponse = await rpc(
            request,
            deps.threads(request).AppendEntries,
            threads_service_pb2.AppendEntriesRequest(
                request_id=f"{request_id}:{start}",
                thread_id=conversation_id,
                entries=[
                    threads_pb2.Entry(
                        role=roles[role], content=text, source="client", requester=user, target="personal"
                    )
                    for role, text in turns[start : start + SEED_BATCH]
                ],
            ),
            user,
        )
        appended += response.entries
    return appended


async def conversation_for(
    request: Request, user: str, conversation_id: str, exchange: Exchange
) -> dict[str, str]:
    """The conversation the run goes to, as response headers: the one named
    (its history checked against the client's) or a new one."""
    if conversation_id:
        # Unknown, or another user's: 404.
        await rpc(
            request,
            deps.threads(request).GetConversation,
            threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
            user,
        )
        headers = {CONVERSATION_HEADER: conversation_id}
        if exchange.earlier:
            stored = await _stored_tail(request, user, conversation_id, len(exchange.earlier))
            if not history_matches(exchange.earlier, stored):
                raise OpenAIError(
                    409,
                    "conversation_history_mismatch",
                    "the earlier messages differ from the conversation's stored history: send its "
                    "turns as they were, only the new message, or no "
                    f"{CONVERSATION_HEADER} header to start a new conversation",
                    "messages",
                    headers,
                )
        return headers
    response: threads_service_pb2.CreateConversationResponse = await rpc(
        request,
        deps.threads(request).CreateConversation,
        threads_service_pb2.CreateConversationRequest(),
        user,
        idempotent=False,
    )
    headers = {CONVERSATION_HEADER: response.conversation.id}
    if exchange.earlier:
        try:
            seed = f"{response.conversation.id}:client-history"
            await append_turns(request, user, response.conversation.id, exchange.earlier, seed)
        except grpc.aio.AioRpcError as error:
            raise refusal(error, "messages", headers) from error
    return headers
