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
