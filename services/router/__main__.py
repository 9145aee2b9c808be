"""python -m services.router [serve|migrate]"""

from services.router.server import MIGRATIONS, build_server
from services.router.settings import RouterSettings
from services.shared.bootstrap import main

if __name__ == "__main__":
    main(RouterSettings, build_server, MIGRATIONS)
