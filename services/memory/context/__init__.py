"""Project context, its import from a project folder, and live state."""
