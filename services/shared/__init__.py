"""Plumbing every Switchboard service shares: settings, database, migrations,
telemetry, server bootstrap, error mapping, client channels, identity."""
