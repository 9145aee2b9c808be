"""Switchboard's gRPC services (``python -m services.<name>``) and their launcher.

This package is imported before anything a service imports, so it is where
gRPC's fork support is turned off, before grpc itself is loaded: gRPC reads
``GRPC_ENABLE_FORK_SUPPORT`` once, as it loads, and ignores later changes.

Why: the services run on uvloop (services/shared/event_loop.py), which starts
a subprocess (the engine's MCP servers and CLI agents) with libuv's real
``fork()`` before ``exec()``; asyncio's loop goes through CPython's
subprocess code, which uses ``vfork()`` on Linux. A real fork runs the
``pthread_atfork`` handlers gRPC registers while fork support is on: in the
child, between the fork and the exec, they restart gRPC's poller and
thread-pool threads over state copied from threads that were busy in the
parent, and those threads crash (SIGSEGV, or gRPC's ``Check failed:
next_worker->state == KICKED`` abort), killing the child before it execs:
an MCP server "exits" at once and the run's tool call fails. Fork support
serves processes that fork *without* exec and use gRPC in the child; no
Switchboard process does that. https://github.com/grpc/grpc/issues/13873
reports gRPC's fork handlers breaking fork+exec children, with this cure;
https://github.com/MagicStack/uvloop/issues/749 that uvloop's spawn runs
fork hooks that asyncio's does not.

``setdefault``: an operator's explicit value wins (docs/operations.md)."""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
