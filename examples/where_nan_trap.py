"""The `where`-gradient NaN trap, found with debug_nans and fixed with a double where.

    f(x) = where(x > 0, sqrt(x), 0)

is 0 at x = 0 and its forward pass is clean, yet grad(f)(0) is NaN. Both branches
of a `where` are computed and differentiated: the backward pass sends the unused
sqrt branch a zero cotangent, and sqrt's derivative rule divides it by 2*sqrt(x),
which is 0 at x = 0, so 0 / 0 = NaN, and `where`'s rule adds that NaN to x's
gradient. The fix: make the input of the dangerous operation safe *before* it
(an inner where), keep the outer where for the value:

    safe_x = where(x > 0, x, 1.0)
    f(x)   = where(x > 0, sqrt(safe_x), 0)

Run: python examples/where_nan_trap.py
"""
import numpy as np

import fgrad
import fgrad.numpy as fnp


def trap(x):
    return fnp.where(x > 0, fnp.sqrt(x), 0.0).sum()


def fixed(x):
    ok = x > 0
    safe_x = fnp.where(ok, x, 1.0)          # sqrt never sees 0 (or negatives)
    return fnp.where(ok, fnp.sqrt(safe_x), 0.0).sum()


def main():
    x = np.array([4.0, 0.0, 1.0])
    print("f(x)             =", trap(x))
    print("grad trap(x)     =", fgrad.grad(trap)(x), "  <- NaN where x = 0")

    # debug_nans names the operation and the line whose derivative rule made the NaN.
    fgrad.config.update("debug_nans", True)
    try:
        fgrad.jit(fgrad.grad(trap))(x)
    except fgrad.debug.DebugNansError as e:
        print("\ndebug_nans says:\n" + str(e) + "\n")
    print("grad fixed(x)    =", fgrad.grad(fixed)(x), "  <- no NaN")
    fgrad.config.update("debug_nans", False)


if __name__ == "__main__":
    main()
