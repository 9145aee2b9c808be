"""The project a request of the memory service names."""

from __future__ import annotations

from services.shared.errors import TooLarge

DEFAULT_PROJECT_ID = "default"
MAX_PROJECT_ID_CHARS = 128


def project_of(project_id: str) -> str:
    """The project a request names: "default" when empty."""
    project = project_id.strip() or DEFAULT_PROJECT_ID
    if len(project) > MAX_PROJECT_ID_CHARS:
        raise TooLarge(f"project_id is longer than {MAX_PROJECT_ID_CHARS} characters", field="project_id")
    return project
