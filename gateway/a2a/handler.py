"""The A2A request handler over the engine: the SDK's transports (JSON-RPC
over HTTP, gRPC) parse and encode, this class maps each A2A method onto
Switchboard's runs, as the caller.

- ``SendMessage`` / ``SendStreamingMessage``: an ask of the agent on its
  one shared thread (``AskAgent``): the requester is the caller, the
  correlation id the message's ``contextId`` (one is made when it has none),
  the idempotency key its ``contextId`` and ``messageId`` (a resent message
  follows the same task). A push notification config sent with the message
  is the run's webhook (signed, SSRF-checked as every webhook).
- A task is a run (task id = run id); ``GetTask``, ``ListTasks`` (the
  caller's runs on the agent's thread) and ``CancelTask`` read and cancel it.
- ``SubscribeToTask`` streams the run's persisted log: the task first, then
  its events; with the resume-cursor extension, only those after the
  client's cursor, and an ended task's last events too.

Every call names the caller with their signed identity, so membership and
quotas are the engine's and threads' as for every other route."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.types import a2a_pb2
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from starlette.datastructures import State

from gateway.a2a.tasks import (
    CURSOR_EXTENSION,
    TERMINAL,
    Event,
    TaskEncoder,
    context_of,
    cursor_of,
    history_message,
    request_id,
    task_of,
)
from gateway.settings import GatewaySettings
from services.shared.clients import call
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc

Response = TypeVar("Response")

# ServerCallContext.state keys, set by the bindings' context builders.
IDENTITY = "switchboard_identity"  # (user, role), or None: no valid token (gRPC)
AGENT = "switchboard_agent"  # the agent the JSON-RPC route already found visible
CURSOR = "switchboard_cursor"  # the Last-Event-ID the client sent ("" for none)
GRPC_CONTEXT = "grpc_context"  # the gRPC binding's servicer context (the SDK's key)
# An A2A id becomes part of a request id of at most 128 characters.
ID_MAX = 60
# How long CancelTask waits for the run to settle (the engine's
# cancel_poll_seconds is 0.5 s on another replica).
CANCEL_WAIT_SECONDS = 5.0
PUSH_CONFIG_ID = "webhook"
# The entries of an ask that are its task's history (not its tool calls).
SPOKEN = (threads_pb2.ROLE_USER, threads_pb2.ROLE_ASSISTANT)


@dataclass(frozen=True)
class Caller:
    user: str
    role: str
    agent_id: str

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return user_metadata(self.user, self.role)


class SwitchboardRequestHandler(RequestHandler):
    """``state``: the gateway's app state (its stubs, opened at start-up)."""

    def __init__(self, state: State, settings: GatewaySettings) -> None:
        self._state = state
        self._settings = settings

    @property
    def _engine(self) -> engine_service_pb2_grpc.EngineServiceAsyncStub:
        return self._state.engine  # type: ignore[no-any-return]

    @property
    def _threads(self) -> threads_service_pb2_grpc.ThreadsServiceAsyncStub:
        return self._state.threads  # type: ignore[no-any-return]

    # -- who calls, and which agent ------------------------------------

    async def _caller(self, context: ServerCallContext) -> Caller:
        """The caller and the agent they address. Over gRPC (no HTTP route
        before it): UNAUTHENTICATED without a valid token, NOT_FOUND for an
        agent the caller cannot see (a foreign one looks missing)."""
        identity = context.state.get(IDENTITY)
        if identity is None:
            await _abort(context, grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")
        user, role = identity
        checked = context.state.get(AGENT)
        if checked:
            return Caller(user, role, checked)
        agent_id = context.tenant or self._settings.a2a_default_agent
        if not agent_id:
            await _abort(context, grpc.StatusCode.NOT_FOUND, "name the agent as the tenant")
        caller = Caller(user, role, agent_id)
        try:
            found = threads_service_pb2.GetAgentRequest(agent_id=agent_id)
            await self._call(caller, self._threads.GetAgent, found)
        except TaskNotFoundError:
            await _abort(context, grpc.StatusCode.NOT_FOUND, f"agent {agent_id!r} not found")
        context.state[AGENT] = agent_id
        return caller

    async def _call(
        self,
        caller: Caller,
        method: Callable[..., Awaitable[Response]],
        message: object,
        *,
        idempotent: bool = True,
    ) -> Response:
        try:
            return await call(
                method,
                message,
                timeout=self._settings.call_timeout,
                metadata=caller.metadata(),
                idempotent=idempotent,
            )
        except grpc.aio.AioRpcError as error:
            raise a2a_error(error) from error

    async def _run(self, caller: Caller, task_id: str) -> engine_pb2.Run:
        """The caller's run ``task_id`` of this agent (TaskNotFound otherwise)."""
        if not task_id or len(task_id) > 64:
            raise TaskNotFoundError
        get = engine_service_pb2.GetRunRequest(run_id=task_id)
        response = await self._call(caller, self._engine.GetRun, get)
        run: engine_pb2.Run = response.run
        if run.agent_id != caller.agent_id:
            raise TaskNotFoundError
        return run

    # -- messages -------------------------------------------------------

    @validate_request_params
    async def on_message_send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | a2a_pb2.Message:
        """The task when the run has ended (or at once, still working, with
        ``returnImmediately``: the run goes on)."""
        task: a2a_pb2.Task | None = None
        encoder: TaskEncoder | None = None
        async with contextlib.aclosing(self._ask(params, context)) as events:
            async for item, last in events:
                encoder = last
                if isinstance(item, a2a_pb2.Task):
                    task = item
                    if params.configuration.return_immediately:
                        return task
        if task is None or encoder is None:
            raise InternalError("the run ended without an event")
        done = encoder.task()
        done.history.extend(task.history)
        return done

    @validate_request_params
    async def on_message_send_stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        async for item, _ in self._ask(params, context):
            yield item

    async def _ask(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[tuple[Event, TaskEncoder]]:
        """The task, then its events as the run makes them."""
        caller = await self._caller(context)
        message = params.message
        text = _text_of(message)
        if message.task_id:
            raise UnsupportedOperationError(
                "a task is one run and takes no further message: send a new message with the same contextId"
            )
        context_id = message.context_id or str(uuid.uuid4())
        if len(context_id) > ID_MAX or len(message.message_id) > ID_MAX:
            raise InvalidParamsError(f"messageId and contextId are at most {ID_MAX} characters")
        ask = engine_service_pb2.AskAgentRequest(
            request_id=request_id(context_id, message.message_id),
            requester=caller.user,
            target_agent_id=caller.agent_id,
            message=text,
            correlation_id=context_id,
            webhook_url=_webhook_of(params.configuration.task_push_notification_config),
        )
        stream = self._engine.AskAgent(
            ask, timeout=self._settings.run_stream_timeout, metadata=caller.metadata()
        )
        encoder: TaskEncoder | None = None
        try:
            async for response in stream:
                event = response.event
                if encoder is None:
                    encoder = TaskEncoder(event.run_id, context_id, cursor=_cursor_active(context))
                    task = encoder.task()
                    task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
                    asked = a2a_pb2.Message()
                    asked.CopyFrom(message)
                    asked.task_id, asked.context_id = event.run_id, context_id
                    task.history.append(asked)
                    yield task, encoder
                for item in encoder.encode(event):
                    yield item, encoder
        except grpc.aio.AioRpcError as error:
            raise a2a_error(error) from error
        finally:
            stream.cancel()  # leaving early (returnImmediately, a client gone): the run goes on

    # -- tasks ----------------------------------------------------------

    @validate_request_params
    async def on_get_task(
        self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        """The task as it stands: its answer so far (stored so far, for a
        running one) and its history, the question then, once answered, the
        answer; only the last ``historyLength`` messages when given."""
        caller = await self._caller(context)
        run = await self._run(caller, params.id)
        if params.history_length < 0:
            raise InvalidParamsError("historyLength must not be negative")
        encoder = TaskEncoder(run.id, context_of(run))
        async for event in self._watch(caller, run.id, stored_only=True):
            encoder.encode(event)
        task = encoder.task(run)
        if not params.HasField("history_length"):
            task.history.extend(await self._history(caller, run))
        elif params.history_length:
            task.history.extend((await self._history(caller, run))[-params.history_length :])
        return task

    async def _history(self, caller: Caller, run: engine_pb2.Run) -> list[a2a_pb2.Message]:
        """The run's messages, from its ask's entries on the agent's thread:
        the question, and the answer once written."""
        view = threads_service_pb2.ListEntriesRequest
        correlation = view.ForCorrelation(thread_id=run.conversation_id, correlation_id=context_of(run))
        messages: list[a2a_pb2.Message] = []
        token = ""
        while True:  # a context's other tasks share its entries: this run's are picked out
            page = await self._call(
                caller,
                self._threads.ListEntries,
                view(for_correlation=correlation, page_size=100, page_token=token),
            )
            messages += [
                history_message(run, entry)
                for entry in page.entries
                if entry.run_id == run.id and entry.role in SPOKEN and entry.content
            ]
            token = page.next_page_token
            if not token or len(messages) >= 2:
                return messages

    @validate_request_params
    async def on_list_tasks(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        """The caller's tasks of this agent, newest first, one page of runs
        (of one ``contextId`` when given); ``status`` filters that page."""
        caller = await self._caller(context)
        if params.page_size < 0 or params.page_size > 100:
            raise InvalidParamsError("pageSize is between 1 and 100")
        thread_id = await self._thread_of(caller)
        if not thread_id:
            return a2a_pb2.ListTasksResponse()
        runs = await self._call(
            caller,
            self._engine.ListRuns,
            engine_service_pb2.ListRunsRequest(
                conversation_id=thread_id,
                page_size=params.page_size,
                page_token=params.page_token,
                correlation_id=params.context_id,
            ),
        )
        tasks = [
            task
            for task in map(task_of, runs.runs)
            if not params.status or task.status.state == params.status
        ]
        return a2a_pb2.ListTasksResponse(
            tasks=tasks, next_page_token=runs.next_page_token, page_size=len(tasks), total_size=len(tasks)
        )

    async def _thread_of(self, caller: Caller) -> str:
        """The agent's shared thread ("" before its first ask)."""
        view = threads_service_pb2.ListEntriesRequest
        try:
            head = await self._call(
                caller,
                self._threads.ListEntries,
                view(for_agent=view.ForAgent(agent_id=caller.agent_id), page_size=1),
            )
        except TaskNotFoundError:
            return ""
        return str(head.thread_id)

    @validate_request_params
    async def on_cancel_task(
        self, params: a2a_pb2.CancelTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        """Cancels the task's run, and answers once it has settled (within
        a few seconds; else still working)."""
        caller = await self._caller(context)
        run = await self._run(caller, params.id)
        state = task_of(run).status.state
        if state in TERMINAL:
            raise TaskNotCancelableError(f"the task has ended ({a2a_pb2.TaskState.Name(state)})")
        await self._call(caller, self._engine.CancelRun, engine_service_pb2.CancelRunRequest(run_id=run.id))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT_SECONDS
        while run.status == engine_pb2.RUN_STATUS_RUNNING and loop.time() < deadline:
            await asyncio.sleep(0.1)
            run = await self._run(caller, run.id)
        return task_of(run)

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task, then its events from the persisted log: all of them
        (the answer artifact starts again, replacing what the client had),
        or with the cursor extension only those after the client's cursor.
        An ended task: an error, as the spec says, unless the extension is
        active (then what the client missed of its end)."""
        caller = await self._caller(context)
        run = await self._run(caller, params.id)
        active = _cursor_active(context)
        after = cursor_of(str(context.state.get(CURSOR, ""))) if active else 0
        if active and after < 0:
            raise InvalidParamsError(f"{CURSOR_EXTENSION}: Last-Event-ID must be a sequence number")
        snapshot = task_of(run)
        if snapshot.status.state in TERMINAL and not active:
            raise UnsupportedOperationError("the task has ended: read it with GetTask")
        yield snapshot
        encoder = TaskEncoder(run.id, context_of(run), after=after, cursor=active)
        async for event in self._watch(caller, run.id):
            for item in encoder.encode(event):
                yield item

    async def _watch(
        self, caller: Caller, run_id: str, *, stored_only: bool = False
    ) -> AsyncGenerator[engine_pb2.RunEvent]:
        """The run's whole log, then its events until it ends (at once for
        an ended run); ``stored_only``: its log as stored now."""
        stream = self._engine.WatchRun(
            engine_service_pb2.WatchRunRequest(run_id=run_id, stored_only=stored_only),
            timeout=self._settings.run_stream_timeout,
            metadata=caller.metadata(),
        )
        try:
            async for response in stream:
                yield response.event
        except grpc.aio.AioRpcError as error:
            raise a2a_error(error) from error
        finally:
            stream.cancel()

    # -- push notification configs: a run's webhook -------------------

    @validate_request_params
    async def on_create_task_push_notification_config(
        self, params: a2a_pb2.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """The running task's one config: its run's webhook, set (replacing
        any) on whichever replica runs it. An ended task's is refused."""
        caller = await self._caller(context)
        run = await self._run(caller, params.task_id)
        url = _webhook_of(params)
        if not url:
            raise InvalidParamsError("the push notification config needs a url")
        return _push_config(await self._set_webhook(caller, run, url))

    async def _set_webhook(self, caller: Caller, run: engine_pb2.Run, url: str) -> engine_pb2.Run:
        if run.status != engine_pb2.RUN_STATUS_RUNNING:
            raise UnsupportedOperationError("the task has ended: its push notification is already decided")
        set_webhook = engine_service_pb2.SetRunWebhookRequest(run_id=run.id, webhook_url=url)
        response = await self._call(caller, self._engine.SetRunWebhook, set_webhook)
        updated: engine_pb2.Run = response.run
        return updated

    @validate_request_params
    async def on_get_task_push_notification_config(
        self, params: a2a_pb2.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        caller = await self._caller(context)
        run = await self._run(caller, params.task_id)
        if not run.webhook_url or params.id not in ("", PUSH_CONFIG_ID):
            raise TaskNotFoundError("the task has no such push notification config")
        return _push_config(run)

    @validate_request_params
    async def on_list_task_push_notification_configs(
        self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        caller = await self._caller(context)
        run = await self._run(caller, params.task_id)
        configs = [_push_config(run)] if run.webhook_url else []
        return a2a_pb2.ListTaskPushNotificationConfigsResponse(configs=configs)

    @validate_request_params
    async def on_delete_task_push_notification_config(
        self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Clears the running task's webhook: its end is delivered nowhere."""
        caller = await self._caller(context)
        run = await self._run(caller, params.task_id)
        if not run.webhook_url or params.id not in ("", PUSH_CONFIG_ID):
            raise TaskNotFoundError("the task has no such push notification config")
        await self._set_webhook(caller, run, "")

    async def on_get_extended_agent_card(
        self, params: a2a_pb2.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a_pb2.AgentCard:
        await self._caller(context)
        raise ExtendedAgentCardNotConfiguredError


def _webhook_of(config: a2a_pb2.TaskPushNotificationConfig) -> str:
    """The webhook a push notification config names. Deliveries are signed
    with the engine's secret (Standard Webhooks), so a client's own token or
    authentication would not be sent: refused rather than ignored."""
    if config.token or config.HasField("authentication"):
        raise InvalidParamsError(
            "push notifications are signed by Switchboard (Standard Webhooks): "
            "token and authentication are not supported"
        )
    return config.url


def _push_config(run: engine_pb2.Run) -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(id=PUSH_CONFIG_ID, task_id=run.id, url=run.webhook_url)


def _text_of(message: a2a_pb2.Message) -> str:
    """The text of a user message: its text parts, joined."""
    if message.role != a2a_pb2.ROLE_USER:
        raise InvalidParamsError("the message's role must be ROLE_USER")
    if any(part.WhichOneof("content") != "text" for part in message.parts):
        raise InvalidParamsError("only text parts are read")
    text = "".join(part.text for part in message.parts)
    if not text.strip():
        raise InvalidParamsError("the message has no text")
    return text


def _cursor_active(context: ServerCallContext) -> bool:
    return CURSOR_EXTENSION in context.requested_extensions


async def _abort(context: ServerCallContext, code: grpc.StatusCode, message: str) -> NoReturn:
    """Ends a gRPC call with ``code``; over JSON-RPC the HTTP route has
    already answered 401/404, so this is a task not found."""
    servicer: Any = context.state.get(GRPC_CONTEXT)
    if servicer is not None:
        await servicer.abort(code, message)
    raise TaskNotFoundError(message)


def a2a_error(error: grpc.aio.AioRpcError) -> Exception:
    """An engine or threads error as the A2A error a client understands."""
    code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.NOT_FOUND:
        return TaskNotFoundError(details)
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE):
        return InvalidParamsError(details)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return UnsupportedOperationError(details)
    if code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.PERMISSION_DENIED):
        # A quota or a role: the client's to fix, named as the engine named it.
        return InvalidRequestError(details, data={"status": code.name})
    return InternalError(f"{code.name}: {details}")
