"""The verified TLS contexts of outbound HTTP clients, built once per process.

An HTTP client built without one makes its own, and loading the CA bundle
into it costs 30 to 40 ms of CPU: an engine start built three (the webhook
worker, one per configured provider), paid again by every in-process start in
the tests. The trust store is the one each library would have chosen itself
(its ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` handling included), read once: a
context is never changed after it is built, so every client may share it.

Two libraries, two contexts: the webhook worker speaks ``httpx``, the model
SDKs (openai, anthropic) their own transport, ``httpx2``."""

from __future__ import annotations

import functools
import ssl

# Each library is imported when its first context is asked for, by a module
# that already needs it: importing this one costs nothing.


@functools.cache
def httpx_context() -> ssl.SSLContext:
    """What ``httpx.AsyncClient(verify=True)`` would build, shared."""
    import httpx

    return httpx.create_ssl_context()


@functools.cache
def sdk_context() -> ssl.SSLContext:
    """What the model SDKs' default client would build, shared."""
    import httpx2  # the SDKs' transport

    return httpx2.create_ssl_context()
