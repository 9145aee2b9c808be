"""The settings base every service extends: one frozen object, read from the
environment once in ``__main__`` and passed down (no ``os.environ`` elsewhere)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
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
    # Run the migrations at start-up (the default); off when a migration job runs them.
    migrate_on_start: bool = True
    # How long a database operation is retried when its connection drops (a
    # PostgreSQL restart or failover), seconds; 0 = never (services/shared/db_retry.py).
    database_retry_seconds: float = Field(default=20.0, ge=0)
    otlp_endpoint: str = Field(default="", validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"))
    log_level: str = Field(default="INFO", validation_alias=AliasChoices("SWITCHBOARD_LOG_LEVEL"))
    # Prometheus /metrics on this port (0: not served).
    metrics_port: int = 0
    # Seconds in-flight RPCs get to finish after SIGTERM.
    shutdown_grace: float = 10.0

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / (self.service_name + '.db')}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"
