"""python -m services.memory [serve|migrate|import-project ...|reembed]"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["import-project"]:
        # A client of a running memory service: the server is not loaded.
        from services.memory.context.project_import import main as import_main

        sys.exit(import_main(sys.argv[2:]))
    from services.memory.server import MIGRATIONS, build_server
    from services.memory.settings import MemorySettings
    from services.shared.bootstrap import main

    if sys.argv[1:2] == ["reembed"]:
        from services.memory.notes.reembed import main as reembed_main

        sys.exit(reembed_main(sys.argv[2:], MIGRATIONS))
    main(MemorySettings, build_server, MIGRATIONS)
