"""The bottom layer: errors, result records, the SQL store, event files (imports only schemas/)."""
