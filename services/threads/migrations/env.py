from services.shared.migrations import run_env
from services.threads.models import SQLModel

run_env(SQLModel.metadata)
