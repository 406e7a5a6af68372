"""fgrad.distributed and fgrad_nn.distributed across processes: each test starts
`mpiexec -n N` on a script in tests/distributed_scripts/ (oversubscribing this
machine's cores) with a timeout, so a hang fails the test instead of CI.
Skipped where mpi4py or mpiexec is missing (the `mpi` extra, part of `dev`)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")
ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "distributed_scripts"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent) + os.pathsep
                       + os.environ.get("PATH", ""))
if MPIEXEC is None:
    pytest.skip("mpiexec not found (pip install 'fgrad[mpi]')", allow_module_level=True)


def mpirun(n, script, *args, timeout=120):
    """Run script on n ranks; (returncode, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), FGRAD_MPI_DEBUG="0",
               OMP_NUM_THREADS="1", HYDRA_LAUNCHER="fork")
    cmd = [MPIEXEC, "-n", str(n), sys.executable, str(SCRIPTS / script), *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def all_ok(n, out, err, code):
    assert code == 0, err[-4000:]
    # ranks' lines may interleave: find each rank's mark anywhere in the output
    assert sorted(map(int, re.findall(r"OK rank (\d+)", out))) == list(range(n)), \
        out + err[-4000:]


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_eager_jit_vmap_and_derivatives(n):
    code, out, err = mpirun(n, "collectives.py")
    all_ok(n, out, err, code)


def test_failing_rank_aborts_the_job_with_its_error():
    code, out, err = mpirun(2, "failing_rank.py", timeout=60)
    assert code != 0
    assert "boom from rank 1" in err and "rank 1 of 2 failed" in err, err
    assert "got past" not in out


def test_mismatched_shapes_name_both_shapes_in_debug_mode():
    code, out, err = mpirun(2, "mismatched_shapes.py")
    all_ok(2, out, err, code)


@pytest.mark.parametrize("n", [2])
def test_data_parallel_equals_single_process_with_n_times_the_batch(n, tmp_path):
    code, out, err = mpirun(n, "data_parallel.py", tmp_path)
    all_ok(n, out, err, code)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from_rank_0.safetensors"]


@pytest.mark.slow
def test_resmlp_example_runs_data_parallel(tmp_path):
    pytest.importorskip("sklearn")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [MPIEXEC, "-n", "2", sys.executable, str(ROOT / "examples" / "resmlp.py"),
           "--distributed", "--quick", "--no-progress", "--out", str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "data parallel on 2 MPI ranks" in p.stdout
    assert p.stdout.count("reloaded the checkpoint") == 1          # rank 0 alone reports
    assert sorted(f.name for f in tmp_path.iterdir()) == \
        ["checkpoint.safetensors", "curves.png", "history.json"]
