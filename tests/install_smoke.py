"""The smoke test of an installed fgrad, run by `make dist` and tests/test_install.py
in a fresh virtual environment that holds only `pip install fgrad` (no extras):

    python -I tests/install_smoke.py README.md examples/tour.py

fgrad is the installed copy and its version is the distribution's; fgrad_nn
imports; every code block of the README's "A short tour" section and
examples/tour.py run; no optional package was installed along the way.
"""
import importlib.metadata
import importlib.util
import re
import runpy
import sys
from pathlib import Path

OPTIONAL = ["safetensors", "tqdm", "matplotlib", "sklearn", "cupy", "mpi4py"]


def readme_tour(readme):
    """The ```python blocks of the README's "## A short tour" section, in order."""
    text = Path(readme).read_text()
    section = text.split("## A short tour", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return [_code(b) for b in blocks]


def _code(block):
    """A block's code: an interactive session (`>>> `) without its printed output."""
    if not block.startswith(">>> "):
        return block
    return "".join(line[4:] + "\n" for line in block.splitlines()
                   if line.startswith((">>> ", "... ")))


def main(readme, tour):
    import fgrad
    import fgrad_nn  # noqa: F401

    assert "site-packages" in fgrad.__file__, f"not the installed fgrad: {fgrad.__file__}"
    assert fgrad.__version__ == importlib.metadata.version("fgrad"), fgrad.__version__
    installed = [m for m in OPTIONAL if importlib.util.find_spec(m) is not None]
    assert not installed, f"optional packages came with `pip install fgrad`: {installed}"
    blocks = readme_tour(readme)
    assert blocks, "the README has no tour"
    namespace = {}
    for block in blocks:
        exec(compile(block, readme, "exec"), namespace)
    runpy.run_path(tour, run_name="__main__")
    print(f"smoke ok: fgrad {fgrad.__version__}, {len(blocks)} README blocks and {tour} ran")


if __name__ == "__main__":
    main(*sys.argv[1:])
