"""Where CLI providers keep the native session ids they resume: the threads
service's provider sessions (one live session per agent thread and
provider), so every engine replica resumes the same session."""

from __future__ import annotations

from services.engine.collaborators import Collaborators

# These calls act for no user: agent threads belong to the workspace.
SERVICE_IDENTITY = "service:engine"


class ThreadsSessionStore:
    """providers.cli.SessionStore over threads: the key is the agent thread."""

    def __init__(self, collaborators: Collaborators) -> None:
        self._collab = collaborators

    async def get(self, key: str, provider: str) -> str | None:
        return await self._collab.provider_session(SERVICE_IDENTITY, key, provider)

    async def put(self, key: str, provider: str, session_id: str) -> None:
        await self._collab.bind_provider_session(SERVICE_IDENTITY, key, provider, session_id, replace=True)
