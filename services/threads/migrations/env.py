from sqlmodel import SQLModel

import services.threads.lease_models  # noqa: F401
import services.threads.models  # noqa: F401 - registers the tables on SQLModel.metadata
from services.shared.migrations import run_env

run_env(SQLModel.metadata)
