"""tbd: a profiler for deep-learning training (the TBD suite, modernised)."""

__version__ = "0.1.0"
