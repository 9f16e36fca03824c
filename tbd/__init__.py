"""tbd: a profiler for deep-learning training (the TBD suite, modernised).

Public API: `profile_step` (profile your own PyTorch training step), `load_profile` (read a
saved profile.json or run directory) and the `Profile` record.
"""

__version__ = "0.1.0"

# The public names resolve on first use, not here: every `import tbd.<anything>` runs this file
# first, in the runner child and the framework venvs too, which hold only numpy and psutil (no
# rich, no matplotlib); importing the API here would drag the whole shell into each of them.


def profile_step(*args, **kwargs):
    """Profile a user's own training step; see tbd.cli.api.profile_step."""
    from tbd.cli.api import profile_step as _profile_step

    return _profile_step(*args, **kwargs)


def load_profile(path):
    """Load and validate a profile.json (any name) or RUN_DIR; see tbd.cli.results.profile_at."""
    from tbd.cli.results import profile_at

    return profile_at(path)


def __getattr__(name):
    if name == "Profile":
        from tbd.core.profile_result import Profile

        return Profile
    raise AttributeError(name)
