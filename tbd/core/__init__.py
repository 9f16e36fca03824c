"""The floor every layer stands on: records, result schemas, errors, run-directory I/O, what a path holds.

Imports only itself (docs/architecture.md)."""
