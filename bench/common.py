"""What every benchmark shares: importing fgrad from a checkout, the machine line,
per-call timing, and writing a report to bench/results/<name>.md."""
import os
import platform
import sys
import timeit
from pathlib import Path

import numpy as np

try:
    import fgrad
except ImportError:  # a source checkout run without `make install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fgrad

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine():
    return (f"Python {platform.python_version()}, NumPy {np.__version__}, "
            f"fgrad {fgrad.__version__}, {platform.machine()}, {os.cpu_count()} CPUs")


def per_call_seconds(fn, repeat, budget_s):
    """Per-call times in seconds over `repeat` runs of n calls each, with n sized so
    that all runs together take about `budget_s`; returns (times, n)."""
    fn()  # warm up (imports, caches)
    timer = timeit.Timer(fn)
    once = min(timer.repeat(repeat=1, number=1))
    n = max(1, int(budget_s / repeat / max(once, 1e-9)))
    return [t / n for t in timer.repeat(repeat=repeat, number=n)], n


def main_for(name, run):
    """Print a benchmark's report and write it to bench/results/<name>.md."""
    report = run()
    print(report)
    path = RESULTS_DIR / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report)
    print(f"(written to {path})")
    return report
