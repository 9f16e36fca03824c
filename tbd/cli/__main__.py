"""`python -m tbd.cli`: the tbd command, as the console script runs it."""

from tbd.cli.main import console_main

console_main()
