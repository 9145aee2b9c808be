from sqlmodel import SQLModel

# Each import registers its tables on SQLModel.metadata.
import services.memory.context.models  # noqa: F401 - project context, live state
import services.memory.handoff.models  # noqa: F401 - handoff summaries and their entries
import services.memory.models  # noqa: F401 - revision counters
import services.memory.notes.models  # noqa: F401 - durable notes
import services.memory.pages.models  # noqa: F401 - pages, versions, ACLs, proposals
import services.memory.personal.models  # noqa: F401 - personal settings
from services.shared.migrations import run_env

run_env(SQLModel.metadata)
