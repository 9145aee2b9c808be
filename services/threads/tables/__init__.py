"""The threads service's SQL, one module per table."""
