"""Personal settings."""
