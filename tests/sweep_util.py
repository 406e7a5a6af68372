"""What the differential sweeps (tests/sweep_*.py) share: the bitwise comparison
and the loop that runs the cases a command-line substring selects and prints
those that differ."""
import sys
import traceback

import numpy as np


def equal_bits(a, b):
    """Element-wise: the same value, signs of zeros included; any NaN equals any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "fc":
        return a == b
    eq = (a == b) | (np.isnan(a) & np.isnan(b))
    if a.dtype.kind == "f":
        eq &= (np.signbit(a) == np.signbit(b)) | np.isnan(a)
    return eq


def run_cases(cases, check, label=lambda case: case[0]):
    """check(*case) -> a list of problems for each case whose name (case[0])
    contains sys.argv[1]; prints them and a count."""
    pat = sys.argv[1] if len(sys.argv) > 1 else ""
    bad = 0
    for case in cases:
        if pat not in case[0]:
            continue
        try:
            probs = check(*case)
        except Exception:
            probs = ["HARNESS " + traceback.format_exc()[-400:]]
        if probs:
            bad += 1
            print(f"== {label(case)}")
            for p in probs:
                print("   ", p)
    print(f"{bad} of {len(cases)} cases differ")
