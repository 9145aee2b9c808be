from __future__ import annotations

import uuid

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.shared.settings import ServiceSettings


class ThreadsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_THREADS_", frozen=True, extra="ignore")

    service_name: str = "threads"
    port: int = 50053
    # Longest entry content accepted, in characters.
    max_entry_chars: int = 200_000
    # Rotation of agent threads: the open segment closes (and the next one
    # starts) once an append brings it to this many entries or characters.
    rotate_after_entries: int = Field(default=2000, gt=0)
    rotate_after_chars: int = Field(default=400_000, gt=0)
    # Largest agent thread ExportAgentThread returns in one message, in
    # characters of entry content (a gRPC message is 4 MiB by default).
    max_export_chars: int = Field(default=3_000_000, gt=0)
    # The memory service: at each rotation its HandoffService summarises the
    # closed segment (services/threads/memory_handoff.py), and its
    # ProjectsService says who is a member of an agent's project (who reads
    # its thread and asks it, who creates agents in a project:
    # services/threads/memory_projects.py). Empty: no summary, the segment's
    # handoff stays pending (SetSegmentHandoff can set it), and only an
    # agent's own members use it; agents go into their creator's personal project.
    memory_address: str = ""
    # Deadline of each call to memory, in seconds.
    call_timeout: float = Field(default=5.0, gt=0)
    # How long registering a remote A2A agent waits for its agent card, in
    # seconds (where it may be: SWITCHBOARD_REMOTE_AGENT_ALLOW_* of services/shared/settings.py).
    remote_card_timeout: float = Field(default=10.0, gt=0)
    # Retention: archived conversations (with their entries) are deleted
    # this many days after they were archived; 0 = kept forever (default).
    # The prune runs once per interval (seconds) across replicas.
    retention_archived_conversations_days: float = Field(default=0.0, ge=0)
    retention_interval_seconds: float = Field(default=3600.0, gt=0)
    # Names this replica as the holder of the prune's lease (diagnostics).
    instance_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
