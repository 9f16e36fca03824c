"""ForwardedSignals: the parent records the user's signals and passes them on in steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tbd.cli.signals import ForwardedSignals


def test_with_no_child_a_signal_is_recorded_not_raised_until_the_third():
    fs = ForwardedSignals()
    with fs.installed():
        os.kill(os.getpid(), signal.SIGTERM)  # while the parent analyses: held
        os.kill(os.getpid(), signal.SIGINT)
        assert fs.received == signal.SIGTERM and fs.count == 2 and fs.exit_code() == 143
        with pytest.raises(KeyboardInterrupt):  # the user insists: give up
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_child_gets_sigint_then_sigterm_then_sigkill():
    # A child that ignores SIGINT and SIGTERM: only the third step (SIGKILL) ends it.
    child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('ready', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"ready"
    fs = ForwardedSignals()
    with fs.forward_to(child):
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
        assert child.poll() is None and not fs.killed
        os.kill(os.getpid(), signal.SIGINT)
        assert child.wait(timeout=10) == -signal.SIGKILL and fs.killed
    assert fs.exit_code() == 130 and fs.name() == "Ctrl-C (SIGINT)"
