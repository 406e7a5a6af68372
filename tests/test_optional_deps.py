"""`import fgrad` and `import fgrad_nn` need only the core dependencies (numpy,
llvmlite, optree, scipy): in a fresh interpreter where every optional package is
hidden, every module of both imports, the transforms run, and each feature that
needs an extra fails with an error naming it."""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HIDDEN = ["safetensors", "tqdm", "matplotlib", "sklearn", "cupy", "cupy_backends",
          "mpi4py", "torch", "pytest", "hypothesis", "mpmath"]

SCRIPT = textwrap.dedent("""
    import importlib, pkgutil, sys, tempfile

    HIDDEN = {hidden!r}

    class Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)")

    sys.meta_path.insert(0, Hide())
    import numpy as np
    import fgrad, fgrad.numpy as fnp, fgrad_nn

    for package in (fgrad, fgrad_nn):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)

    assert float(fgrad.jit(fgrad.grad(lambda x: fnp.sum(fnp.sin(x) ** 2)))(np.ones(3))[0]) > 0
    model = fgrad_nn.Linear(3, 2, key=fgrad.random.key(0))
    assert model(np.ones((4, 3))).shape == (4, 2)
    assert fgrad.devices() == [fgrad.devices("cpu")[0]]

    def expect(extra, call):
        try:
            call()
        except ImportError as e:
            assert f"pip install 'fgrad[{{extra}}]'" in str(e), str(e)
            print("ok", extra, str(e).splitlines()[0])
        except RuntimeError as e:           # devices("gpu"): no GPU available
            assert f"pip install 'fgrad[{{extra}}]'" in str(e), str(e)
            print("ok", extra, str(e).splitlines()[0])
        else:
            raise AssertionError(f"{{call}} ran without its extra {{extra}}")

    from fgrad_nn import checkpoint, data, training
    path = tempfile.mktemp(suffix=".safetensors")
    expect("nn", lambda: checkpoint.save(path, {{"w": np.ones(2)}}))
    expect("nn", lambda: checkpoint.load(path))
    expect("nn", lambda: next(iter(training.Progress(2, disable=True).epochs())))
    expect("examples", lambda: training.plot_curves({{"loss": [1.0, 0.5]}}, path + ".png"))
    expect("examples", data.load_digits)
    expect("gpu", lambda: fgrad.devices("gpu"))
    expect("mpi", lambda: importlib.import_module("fgrad.distributed").rank())
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN)
    assert not loaded, loaded
    print("done")
""")


def test_core_dependencies_suffice_and_extras_are_named():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(hidden=HIDDEN)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "done"
    assert [line.split()[1] for line in lines if line.startswith("ok")] == \
        ["nn", "nn", "nn", "examples", "examples", "gpu", "mpi"]
