"""A2A 1.0 server (docs/connect-agents.md): Switchboard's agents as A2A
agents, over the ``a2a-sdk`` package's JSON-RPC and gRPC bindings."""
