"""Run under `mpiexec -n 2` with debug mode: the ranks pass different shapes to
allreduce; each rank must raise an error naming both shapes."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fgrad  # noqa: E402
import fgrad.distributed as dist  # noqa: E402
import fgrad.numpy as fnp  # noqa: E402

dist.init()
dist.set_debug(True)
r = dist.rank()
for run in (lambda v: dist.allreduce(v), fgrad.jit(lambda v: dist.allreduce(v))):
    try:
        run(fnp.ones(2 + r))
    except TypeError as e:
        message = str(e)
        assert "(2,)" in message and "(3,)" in message, message
    else:
        raise AssertionError("mismatched shapes were not detected")
print(f"OK rank {r}", flush=True)
