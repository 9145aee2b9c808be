"""The settings base every service extends: one frozen object, read from the
environment once in ``__main__`` and passed down (no ``os.environ`` elsewhere)."""

from __future__ import annotations

from pathlib import Path

import grpc
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.shared.event_loop import EventLoopName
from services.shared.identity_tokens import IdentityTokens, parse_keys
from services.shared.outbound_urls import UrlPolicy
from services.shared.wakeups import SAFETY_POLL_SECONDS


class SecuritySettings(BaseSettings):
    """What every process that calls or serves gRPC shares (the services and
    the gateway): the identity key and the CA of the services' certificates.
    The names carry no service prefix: every process reads the same ones."""

    # populate_by_name: code and tests may pass identity_key=... as well as the env name.
    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    # The secret identity tokens are signed with (HS256; docs/security.md):
    # whitespace-separated, the first signs, each one verifies (rotation).
    identity_key: SecretStr = Field(
        default=SecretStr(""), validation_alias=AliasChoices("SWITCHBOARD_IDENTITY_KEY")
    )
    # A file holding the key(s) the same way (a mounted Secret); added after identity_key's.
    identity_key_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("SWITCHBOARD_IDENTITY_KEY_FILE")
    )
    # Lifetime of a minted identity token, seconds, and the clock skew allowed when checking one.
    identity_token_seconds: float = Field(
        default=60.0, gt=0, validation_alias=AliasChoices("SWITCHBOARD_IDENTITY_TOKEN_SECONDS")
    )
    identity_leeway_seconds: float = Field(
        default=5.0, ge=0, validation_alias=AliasChoices("SWITCHBOARD_IDENTITY_LEEWAY_SECONDS")
    )
    # PEM CA bundle that signed the services' certificates: set, calls to
    # other services use TLS and check their certificate; empty, plaintext.
    tls_ca_file: Path | None = Field(default=None, validation_alias=AliasChoices("SWITCHBOARD_TLS_CA_FILE"))
    # Remote A2A agents (their cards, read by threads; their asks, sent by
    # the engine): which addresses they may be at (services/shared/outbound_urls.py).
    # Loopback (and http to it) is for development only; private addresses
    # for agents inside the operator's own network.
    remote_agent_allow_loopback: bool = Field(
        default=False, validation_alias=AliasChoices("SWITCHBOARD_REMOTE_AGENT_ALLOW_LOOPBACK")
    )
    remote_agent_allow_private_addresses: bool = Field(
        default=False, validation_alias=AliasChoices("SWITCHBOARD_REMOTE_AGENT_ALLOW_PRIVATE_ADDRESSES")
    )

    def identity_tokens(self) -> IdentityTokens:
        """The process's minter and verifier; IdentityKeyError without a usable key."""
        keys = parse_keys(self.identity_key.get_secret_value(), self.identity_key_file)
        return IdentityTokens(keys, self.identity_token_seconds, self.identity_leeway_seconds)

    def remote_agent_policy(self) -> UrlPolicy:
        """Where remote A2A agents may be: the same guard as webhooks."""
        return UrlPolicy(
            allow_loopback=self.remote_agent_allow_loopback,
            allow_private=self.remote_agent_allow_private_addresses,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials for calls to other services (None: plaintext)."""
        if self.tls_ca_file is None:
            return None
        return grpc.ssl_channel_credentials(root_certificates=self.tls_ca_file.read_bytes())


class ServiceSettings(SecuritySettings):
    """Fields common to every gRPC service. Subclasses set ``env_prefix``
    (``SWITCHBOARD_THREADS_`` ...) and ``service_name``."""

    # populate_by_name: code and tests may pass data_dir=... as well as the env name.
    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    service_name: str = "switchboard"
    host: str = "127.0.0.1"
    port: int = 0
    # Folder of the embedded SQLite files, shared by all services on one host.
    data_dir: Path = Field(default=Path(".data"), validation_alias=AliasChoices("SWITCHBOARD_DATA_DIR"))
    # Empty: an SQLite file <data_dir>/<service_name>.db. Otherwise any async
    # SQLAlchemy URL, e.g. postgresql+asyncpg://user@host/db.
    database_url: str = ""
    # Named prepared statements, cached per connection (PostgreSQL). Off behind
    # a pooler in transaction mode that does not track them: PgBouncer before
    # 1.21, or 1.21+ with max_prepared_statements = 0 (docs/operations.md#pgbouncer).
    database_prepared_statements: bool = True
    # The connection the wake-up listener LISTENs on (services/shared/wakeups.py):
    # a direct one to PostgreSQL when database_url goes through PgBouncer in
    # transaction pooling mode. Empty: database_url.
    database_listen_url: str = ""
    # Off: no listener; every wait relies on the safety poll alone.
    push_wakeups: bool = True
    # The safety poll: the longest any wait for another replica's write lasts
    # without a wake-up (a lost notification costs at most this), seconds.
    safety_poll_seconds: float = Field(default=SAFETY_POLL_SECONDS, gt=0)
    # Run the migrations at start-up (the default); off when a migration job runs them.
    migrate_on_start: bool = True
    # How long a database operation is retried when its connection drops (a
    # PostgreSQL restart or failover), seconds; 0 = never (services/shared/db_retry.py).
    database_retry_seconds: float = Field(default=20.0, ge=0)
    otlp_endpoint: str = Field(default="", validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"))
    log_level: str = Field(default="INFO", validation_alias=AliasChoices("SWITCHBOARD_LOG_LEVEL"))
    # The event loop the service runs on (services/shared/event_loop.py):
    # uvloop, or asyncio's own. One name for every service.
    event_loop: EventLoopName = Field(
        default="uvloop", validation_alias=AliasChoices("SWITCHBOARD_EVENT_LOOP")
    )
    # Prometheus /metrics on this port (0: not served).
    metrics_port: int = 0
    # Seconds in-flight RPCs get to finish after SIGTERM.
    shutdown_grace: float = 10.0
    # PEM certificate (chain) and private key this service serves TLS with;
    # both set: TLS only on its port; neither: plaintext (the loopback default).
    tls_cert_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("SWITCHBOARD_TLS_CERT_FILE")
    )
    tls_key_file: Path | None = Field(default=None, validation_alias=AliasChoices("SWITCHBOARD_TLS_KEY_FILE"))
    # A second, plaintext port serving grpc.health.v1 alone (0: none), for
    # probes that cannot speak TLS (Kubernetes' native gRPC probe).
    health_port: int = 0

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / (self.service_name + '.db')}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """TLS credentials for this service's port (None: plaintext);
        ValueError when only one of the certificate and the key is set."""
        if self.tls_cert_file is None and self.tls_key_file is None:
            return None
        if self.tls_cert_file is None or self.tls_key_file is None:
            raise ValueError("TLS needs both SWITCHBOARD_TLS_CERT_FILE and SWITCHBOARD_TLS_KEY_FILE")
        pair = (self.tls_key_file.read_bytes(), self.tls_cert_file.read_bytes())
        return grpc.ssl_server_credentials([pair])
