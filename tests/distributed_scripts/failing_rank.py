"""Run under `mpiexec -n 2`: rank 1 raises while rank 0 waits in an allreduce.
The abort hook must end the whole job, showing rank 1's error (not hang)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fgrad.distributed as dist  # noqa: E402
import fgrad.numpy as fnp  # noqa: E402

dist.init()
if dist.rank() == 1:
    raise ValueError("boom from rank 1")
dist.allreduce(fnp.ones(3))
print("rank 0 got past the allreduce", flush=True)
