"""Event, config and report schemas, and the SQL tables."""
