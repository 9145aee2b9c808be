"""The peer's side of the side-by-side benchmark (tests/bench/bench_peer.py):
a one-node LangGraph graph whose chat model is fake and streams 20 tokens,
as Switchboard's offline model does (no network model on either side).

Loaded by ``langgraph dev`` in the peer's own virtualenv (langgraph.json
beside this file), never by Switchboard's: the imports below are the peer's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import START, MessagesState, StateGraph

TOKENS = [f"word{i} " for i in range(20)]


class FakeModel(BaseChatModel):
    """Answers every prompt with the same 20 tokens, one chunk each when streamed."""

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="".join(TOKENS)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token in TOKENS:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for token in TOKENS:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


model = FakeModel()


async def respond(state: MessagesState) -> dict[str, list[BaseMessage]]:
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = StateGraph(MessagesState).add_node("respond", respond).add_edge(START, "respond").compile()
