"""Runs every code example of the documentation (docs/**/*.md).

Each page's ```python blocks run in order in one namespace, as a reader would
type them; a block that starts with `>>>` is a doctest whose printed output must
match. Blocks fenced as ```text or ```bash are not run.
"""
import doctest
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
PAGES = sorted(p for p in DOCS.rglob("*.md") if FENCE.search(p.read_text()))


def code_blocks(page):
    text = page.read_text()
    for match in FENCE.finditer(text):
        yield text.count("\n", 0, match.start()) + 2, match.group(1)


def run_block(source, namespace, where):
    if source.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(source, namespace, where, where, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
                                     | doctest.IGNORE_EXCEPTION_DETAIL)
        out = []
        runner.run(test, out=out.append, clear_globs=False)
        namespace.update(test.globs)     # DocTest works on a copy of the namespace
        assert runner.failures == 0, "".join(out)
    else:
        exec(compile(source, where, "exec"), namespace)


def test_every_page_has_examples():
    assert len(PAGES) >= 10, PAGES


@pytest.mark.filterwarnings("error::RuntimeWarning")    # examples say where they expect one
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # examples that write files write them here
    namespace = {"__name__": "__docs__"}
    for line, source in code_blocks(page):
        run_block(source, namespace, f"{page.relative_to(DOCS.parent)}:{line}")


# Modules whose public names the reference documents on another page.
DOCUMENTED_ELSEWHERE = {
    "fgrad_nn.module", "fgrad_nn.taps", "fgrad_nn.tree_tools", "fgrad_nn.summary",
    "fgrad_nn.torch_io",                          # on the fgrad_nn page
    "fgrad.scipy",                                # a page per submodule
}


def public_modules():
    import pkgutil

    import fgrad
    import fgrad_nn
    for package in (fgrad, fgrad_nn):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            parts = info.name.split(".")
            if not any(p.startswith("_") for p in parts) and len(parts) <= 3:
                if info.name.count(".") == 1 or parts[1] in ("numpy", "scipy"):
                    yield info.name


def test_api_reference_has_a_page_per_public_module():
    missing = [m for m in public_modules()
               if m not in DOCUMENTED_ELSEWHERE and not (DOCS / "api" / f"{m}.md").exists()]
    assert not missing, (f"add docs/api/<module>.md (an automodule directive, as the "
                         f"others) for {missing}")
