# A partial stub of grpc.aio: only its unary-unary calls are typed (their
# shape as in typeshed's types-grpcio), so that the methods of the
# mypy-protobuf *AsyncStub classes carry their request and response types
# (and a Channel, that stubs made on one are those async ones).
# Everything else stays untyped, as without stubs.
from collections.abc import Generator, Sequence
from typing import Any, Generic, TypeVar

_TRequest = TypeVar("_TRequest")
_TResponse = TypeVar("_TResponse")

class Channel:
    # Untyped but for its type: the generated stubs are async ones on it.
    def __getattr__(self, name: str) -> Any: ...

class UnaryUnaryCall(Generic[_TRequest, _TResponse]):
    def __await__(self) -> Generator[Any, None, _TResponse]: ...
    def __getattr__(self, name: str) -> Any: ...

class UnaryUnaryMultiCallable(Generic[_TRequest, _TResponse]):
    def __call__(
        self,
        request: _TRequest,
        *,
        timeout: float | None = None,
        metadata: Sequence[tuple[str, str | bytes]] | None = None,
        credentials: Any = None,
        wait_for_ready: bool | None = None,
        compression: Any = None,
    ) -> UnaryUnaryCall[_TRequest, _TResponse]: ...

def __getattr__(name: str) -> Any: ...
