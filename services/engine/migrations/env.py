from services.engine.models import SQLModel
from services.shared.migrations import run_env

run_env(SQLModel.metadata)
