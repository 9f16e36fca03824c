"""Real-data tasks that `tbd train` trains a suite model on to a quality target (catalog.py lists them)."""
