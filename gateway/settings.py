"""The gateway's one settings object (SWITCHBOARD_GATEWAY_*), read once at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from services.shared.settings import SecuritySettings

# The /healthz response header that carries the gateway's launch_id.
LAUNCH_ID_HEADER = "X-Switchboard-Launch-Id"


class GatewaySettings(SecuritySettings):
    """The gateway's own settings, and the identity key and services' CA it
    shares with the services (SecuritySettings)."""

    model_config = SettingsConfigDict(
        env_prefix="SWITCHBOARD_GATEWAY_", frozen=True, extra="ignore", populate_by_name=True
    )

    host: str = "127.0.0.1"
    port: int = 8080
    # Set by the launcher for each start: /healthz answers it in the
    # X-Switchboard-Launch-Id header, so the launcher knows it reached the
    # gateway it started, not another program on the same port.
    launch_id: str = ""
    engine_address: str = "127.0.0.1:50051"
    threads_address: str = "127.0.0.1:50053"
    memory_address: str = "127.0.0.1:50054"
    router_address: str = "127.0.0.1:50052"
    # Deadline of unary calls to the services, in seconds.
    call_timeout: float = 5.0
    # Deadline of registering a remote A2A agent, which fetches its card:
    # longer than the threads service's remote_card_timeout (10 s), so the
    # client hears why the card did not arrive rather than a bare 504.
    remote_agent_register_timeout: float = 15.0
    # Deadline of a project import: up to 500 files, each note checked for
    # repeats and embedded, is seconds of work, not a unary call's moment.
    # A retry is safe (an unchanged file is reported unchanged).
    import_timeout: float = 60.0
    # Deadline of a run's event stream (StartRun, WatchRun): the longest a
    # client can follow one run over one connection.
    run_stream_timeout: float = 900.0
    # How long a broken run stream keeps being reopened on another engine
    # replica before the client is told "stream interrupted". Longer than the
    # engine's lease_seconds (15) plus a renewal, so that a crashed replica's
    # runs are settled and their terminal event reaches the client.
    stream_resume_seconds: float = 45.0
    # Largest request body accepted (413 beyond), and longest message.
    max_body_bytes: int = 256 * 1024
    max_message_chars: int = 32_000
    # Prometheus /metrics on the gateway's own port.
    metrics_enabled: bool = True
    # Comment line sent on idle SSE streams so proxies keep them open.
    sse_ping_seconds: float = 15.0
    # Events buffered for one SSE client. A client that falls this far behind
    # (it stopped reading) is dropped: its engine stream is released at once
    # and its connection closed, so it never holds up the engine or others.
    sse_client_queue: int = Field(default=1024, ge=1)
    # A write to a client that takes longer than this (its socket is full:
    # it stopped reading) closes the connection.
    sse_send_timeout: float = Field(default=10.0, gt=0)
    # What a run does when its client goes away before the run ends:
    # "continue" (the default; the client can reconnect with Last-Event-ID or
    # read the outcome later) or "cancel" (the gateway calls CancelRun).
    disconnect_policy: Literal["continue", "cancel"] = "continue"
    # "token:user,token2:user2:admin": a third part "admin" gives the token
    # the admin role (anything else, or none, is a user). Empty: no auth,
    # every request acts as dev_user with dev_role (the local launcher's
    # default, one person on a laptop: an admin; never for a shared deployment).
    tokens: str = ""
    dev_user: str = "local"
    dev_role: Literal["admin", "user"] = "admin"
    # JSON file of hashed tokens written by `python -m gateway tokens ...`;
    # accepted together with `tokens`. Re-read when it changes.
    tokens_file: Path | None = None
    # A2A (gateway/a2a/, docs/connect-agents.md): the agent whose card the
    # host's /.well-known/agent-card.json is ("" = none: that card is 404),
    # also the agent of a gRPC call that names no tenant; the port of the
    # A2A gRPC binding (None = not served), and the address its cards give
    # clients ("" = the host the card was asked from, with that port).
    a2a_default_agent: str = ""
    a2a_grpc_port: int | None = None
    a2a_grpc_address: str = ""
    otlp_endpoint: str = Field(default="", validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"))
    log_level: str = Field(default="INFO", validation_alias=AliasChoices("SWITCHBOARD_LOG_LEVEL"))

    def token_map(self) -> dict[str, tuple[str, str]]:
        """token -> (user, role)."""
        found: dict[str, tuple[str, str]] = {}
        for item in self.tokens.split(","):
            token, _, rest = item.partition(":")
            user, _, role = rest.partition(":")
            if token.strip() and user.strip():
                found[token.strip()] = (user.strip(), "admin" if role.strip() == "admin" else "user")
        return found
