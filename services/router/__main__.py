"""python -m services.router [serve|migrate|fit-thresholds ...|export-feedback ...|reindex]"""

import sys

from services.router.server import MIGRATIONS, build_server
from services.router.settings import RouterSettings
from services.shared.bootstrap import main

if __name__ == "__main__":
    if sys.argv[1:2] == ["fit-thresholds"]:
        from services.router.fit import main as fit_main

        fit_main(sys.argv[2:])
    elif sys.argv[1:2] == ["reindex"]:
        from services.router.reindex import main as reindex_main

        sys.exit(reindex_main(sys.argv[2:]))
    elif sys.argv[1:2] == ["export-feedback"]:
        from services.router.feedback_export import main as export_main

        export_main(sys.argv[2:])
    else:
        main(RouterSettings, build_server, MIGRATIONS)
