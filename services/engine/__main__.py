"""python -m services.engine [serve|migrate]"""

from services.engine.server import MIGRATIONS, build_server
from services.engine.settings import EngineSettings
from services.shared.bootstrap import main

if __name__ == "__main__":
    main(EngineSettings, build_server, MIGRATIONS)
