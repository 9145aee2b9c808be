"""How every service names a project. A project's id is chosen by its
creator; a user's personal project has an id derived from the user, so any
service can name it without asking the memory service (which holds projects
and their members: the one source of truth for access)."""

from __future__ import annotations

import hashlib
import re
from enum import IntEnum

# What a client may write for "my personal project".
PERSONAL_NAMES = frozenset({"", "default", "personal"})
MAX_PROJECT_ID_CHARS = 128
PROJECT_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
PERSONAL_PREFIX = "personal-"


def personal_project_id(user_id: str) -> str:
    """The id of ``user_id``'s personal project: stable, URL-safe, and the
    same in every service and release."""
    return PERSONAL_PREFIX + hashlib.sha256(user_id.encode()).hexdigest()[:20]


def is_personal_name(project_id: str) -> bool:
    return project_id.strip() in PERSONAL_NAMES


class ProjectRole(IntEnum):
    """A member's role in a project (switchboard.memory.v1.ProjectRole's
    numbers); each includes the ones below it. NONE: not a member."""

    NONE = 0
    VIEWER = 1
    EDITOR = 2
    OWNER = 3


def role_phrase(role: ProjectRole) -> str:
    """ "a viewer", "an editor", "an owner": how refusals name a role."""
    name = role.name.lower()
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
