from sqlmodel import SQLModel

import services.engine.lease_models  # noqa: F401
import services.engine.models  # noqa: F401
import services.engine.schedules.models  # noqa: F401 - registers the tables on SQLModel.metadata
import services.engine.webhooks.models  # noqa: F401 - the webhook tables too
from services.shared.migrations import run_env

run_env(SQLModel.metadata)
