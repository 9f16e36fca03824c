"""The roof: commands, orchestration, the runner child, the public API. Nothing below imports it.

Kept empty on purpose: the runner child (`python -m tbd.cli.runner`) runs in framework venvs that
have neither rich nor matplotlib, so importing this package must pull in nothing."""
