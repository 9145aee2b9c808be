"""Exit statuses of a service's process that say why it ended, for whoever
started it (the launcher, an orchestrator)."""

# The identity key is missing or unreadable: starting again will not help.
BAD_IDENTITY_KEY = 2
# An address the service was told to listen on (its gRPC port, health probe
# port or metrics port) could not be bound, usually because another process
# holds it. sysexits' EX_TEMPFAIL: the same start on other ports may work.
CANNOT_LISTEN = 75
