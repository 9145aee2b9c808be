from services.router.models import Skill
from services.shared.migrations import run_env

run_env(Skill.metadata)
