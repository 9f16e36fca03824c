"""Memory by category, one module per framework's records, pure functions."""
