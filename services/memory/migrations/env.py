from sqlmodel import SQLModel

import services.memory.handoff_models  # noqa: F401 - handoff tables
import services.memory.models  # noqa: F401 - registers the tables on SQLModel.metadata
import services.memory.page_models  # noqa: F401 - pages, versions, ACLs, proposals
from services.shared.migrations import run_env

run_env(SQLModel.metadata)
