"""A signal during a count ends it (counting/signals.py), and never aborts the process.

Run in a child process: before the fix, an alarm whose handler raised inside Python code that torch calls from C++
without a way back (autograd's `InputMetadata` reading a fake parameter's device through the dispatch mode) made
C++ call `std::terminate`: "terminate called after throwing an instance of 'python_error'", and the process
aborted, about one alarm in ten for a model with parameters counted with grad enabled.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ALARMS = 40

CHILD = textwrap.dedent(
    f"""
    import random, signal, time

    import torch
    from torch import nn

    from pytest_flopbudget import count


    class Alarm(BaseException):  # like KeyboardInterrupt: no `except Exception` swallows it
        pass


    def alarm(signum, frame):
        raise Alarm


    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(40)])  # parameters: autograd makes their accumulators
    count(model, torch.zeros(2, 8))  # imports done first: an alarm inside an import would break the module
    signal.signal(signal.SIGALRM, alarm)
    rng = random.Random(0)
    lost = 0
    for _ in range({ALARMS}):
        start, delay = time.monotonic(), rng.uniform(0.005, 0.04)
        try:
            signal.setitimer(signal.ITIMER_REAL, delay)
            while time.monotonic() < start + delay + 1.0:  # counts, with grad enabled, until the alarm ends one
                count(model, torch.zeros(2, 8))
            lost += 1
        except Alarm:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    print("lost", lost)
    """
)


def test_an_alarm_during_a_count_ends_it_and_never_aborts_the_process() -> None:
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert "terminate called" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["lost", "0"], (result.stdout, result.stderr[-2000:])
