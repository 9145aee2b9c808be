"""Deadline propagation: a call never outlives the call it serves.

``Deadlines`` (a layer of every server, services.shared.handlers) records
the incoming call's deadline in a context variable, in the call's own task;
``services.shared.clients.call`` gives each outgoing call ``bounded(timeout)``:
its own timeout, cut to what is left of the incoming deadline. So when the
gateway's 5 s run out, every call made on its behalf, however deep, has run
out too, and each service stops its part of the work (gRPC cancels a handler
whose deadline has passed) instead of finishing it for nobody.

Work that deliberately outlives its request (a run, which goes on after its
client leaves) calls ``detach()`` first: a task copies its creator's context,
deadline included."""

from __future__ import annotations

from contextvars import ContextVar

import grpc

from services.shared import timer
from services.shared.handlers import Around, CallLayer

# Absolute timer.monotonic() at which the call being served expires; None: no deadline.
_DEADLINE: ContextVar[float | None] = ContextVar("switchboard_deadline", default=None)


def remaining() -> float | None:
    """Seconds left before the incoming call's deadline (negative once past),
    or None when this task serves no call with a deadline."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - timer.monotonic()


def bounded(timeout: float) -> float:
    """The timeout of an outgoing call: ``timeout``, or less when the call
    being served expires sooner (0 once it has expired: gRPC then fails the
    call at once with DEADLINE_EXCEEDED, without sending it)."""
    left = remaining()
    return timeout if left is None else max(0.0, min(timeout, left))


def detach() -> None:
    """Forgets the incoming deadline in this task's context: for work that
    outlives the call that started it (a run executes in a task of its own)."""
    _DEADLINE.set(None)


def enter(context: grpc.aio.ServicerContext) -> None:
    """Records the deadline of the call ``context`` serves (none without one)."""
    left = context.time_remaining()
    _DEADLINE.set(None if left is None else timer.monotonic() + left)


class Deadlines(CallLayer):
    """Calls ``enter(context)`` in the handler's task before the handler runs."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around:
        return _ENTERED


_ENTERED = Around(check=lambda _request, context: enter(context))
