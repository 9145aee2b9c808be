"""Switchboard's command-line clients (the `switchboard` console script):
`switchboard mcp` serves Switchboard's tools to an agent CLI over stdio.
Everything here goes through the public HTTP API, with the caller's token."""
