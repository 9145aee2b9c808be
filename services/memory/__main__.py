"""python -m services.memory [serve|migrate]"""

from services.memory.server import MIGRATIONS, build_server
from services.memory.settings import MemorySettings
from services.shared.bootstrap import main

if __name__ == "__main__":
    main(MemorySettings, build_server, MIGRATIONS)
