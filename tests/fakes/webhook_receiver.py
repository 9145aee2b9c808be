"""A webhook receiver for tests: a real HTTP server on a loopback port that
records every request (headers, body) and answers each as scripted: "ok"
(200), a status code ("500"), or "hang" (holds the connection without
answering until the receiver closes)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answer: str
    # time.monotonic() when the request arrived.
    at: float


class WebhookReceiver:
    def __init__(self, script: list[str] | None = None, default: str = "ok") -> None:
        # Answers for the first requests, in order; `default` for the rest.
        self.script = list(script or [])
        self.default = default
        self.requests: list[Received] = []
        self._changed = threading.Condition()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._changed:
                    answer = receiver.script.pop(0) if receiver.script else receiver.default
                    receiver.requests.append(
                        Received(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            answer,
                            time.monotonic(),
                        )
                    )
                    receiver._changed.notify_all()
                if answer == "hang":
                    receiver._release.wait(60)
                    return
                status = 200 if answer == "ok" else int(answer)
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Blocks until ``count`` requests have arrived (AssertionError past timeout)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(
                    f"{len(self.requests)} webhook requests after {timeout} s, expected {count}"
                )
            return list(self.requests)

    async def arrived(self, count: int, timeout: float = 30.0) -> list[Received]:
        """``wait_for`` from async code."""
        return await asyncio.to_thread(self.wait_for, count, timeout)


@contextmanager
def webhook_receiver(script: list[str] | None = None, default: str = "ok") -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(script, default)
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.close()
