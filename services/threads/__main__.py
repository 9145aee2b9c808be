"""python -m services.threads [serve|migrate]"""

from services.shared.bootstrap import main
from services.threads.server import MIGRATIONS, build_server
from services.threads.settings import ThreadsSettings

if __name__ == "__main__":
    main(ThreadsSettings, build_server, MIGRATIONS)
