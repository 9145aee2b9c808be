# A partial stub of grpc (see typings/grpc/aio/__init__.pyi): everything else
# stays untyped, as without stubs.
from typing import Any

def __getattr__(name: str) -> Any: ...
