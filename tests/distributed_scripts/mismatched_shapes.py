"""Run under `mpiexec -n 2`: the ranks pass different shapes to allreduce. In
debug mode each rank must raise an error naming both shapes; with --no-debug
the compiled MPI call fails and the job must abort (not hang)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fgrad  # noqa: E402
import fgrad.distributed as dist  # noqa: E402
import fgrad.numpy as fnp  # noqa: E402

dist.init()
r = dist.rank()
if sys.argv[1:] == ["--no-debug"]:      # the compiled MPI call fails: the job must abort
    fgrad.jit(dist.allreduce)(fnp.ones(2 + r))
    print(f"rank {r} got past a mismatched allreduce", flush=True)
    sys.exit(0)
dist.set_debug(True)
for run in (lambda v: dist.allreduce(v), fgrad.jit(lambda v: dist.allreduce(v))):
    try:
        run(fnp.ones(2 + r))
    except TypeError as e:
        message = str(e)
        assert "(2,)" in message and "(3,)" in message, message
    else:
        raise AssertionError("mismatched shapes were not detected")
print(f"OK rank {r}", flush=True)
