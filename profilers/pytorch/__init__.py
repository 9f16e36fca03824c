"""The PyTorch hook and its memory tracker, both run in the runner child (or in-process by the API)."""
