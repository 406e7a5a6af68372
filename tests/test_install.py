"""A fresh virtual environment with only `pip install .` (no extras) runs the
README's tour and examples/tour.py and imports fgrad_nn (tests/install_smoke.py);
`make dist` does the same for the built wheel and sdist."""
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JUNK = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                              ".hypothesis", ".pytest_cache", "bench", "runs")


@pytest.mark.slow
def test_pip_install_without_extras_runs_the_tour(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=JUNK)          # the checkout stays untouched
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    done = subprocess.run([python, "-m", "pip", "install", "-q", str(source)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([python, "-I", ROOT / "tests" / "install_smoke.py",
                           ROOT / "README.md", ROOT / "examples" / "tour.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "smoke ok" in done.stdout
