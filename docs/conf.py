"""Sphinx configuration for fgrad's documentation (`make docs`)."""
import os
import re
import sys

sys.path.insert(0, os.path.abspath(".."))

from fgrad._version import __version__  # noqa: E402

project = "fgrad"
author = "the fgrad authors"
copyright = "the fgrad authors, Apache-2.0"
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"fgrad {release}"

myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": True}
# fgrad.numpy mirrors NumPy, whose names its docstrings mention in backquotes.
default_role = "code"

# Broken references fail the build (`-W --keep-going` in the Makefile). Nitpicky
# checking covers every cross-reference the pages write by hand ({func}`...`,
# {mod}`...`); the autodoc-generated type annotations refer to NumPy, optree and
# typing objects that no inventory here resolves, so those are ignored by pattern.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:class", r"(numpy|np|optree|typing|collections|types|pathlib|os|fgrad\._src)\..*"),
    (r"py:class", r"(Array|ArrayLike|DType|PyTree|Callable|Any|Sequence|Iterable|Mapping)"),
]
nitpick_ignore_regex += [
    (r"py:class", r"fgrad_nn\.module\.Module"),   # documented as fgrad_nn.Module
]

# fgrad's docstrings are plain text with code in `backquotes` (the project's
# convention, shared with the README), not reStructuredText. `_plain_docstrings`
# renders them as written: it escapes what reST would read as markup outside the
# backquotes (|x| substitutions, *emphasis*, trailing_ links), lets a code span
# end before a letter (`ndarray`s), and separates indented examples from the
# prose around them with blank lines (reST needs those; plain text does not).
_PROSE_MARKUP = re.compile(r"([\\*|])|(\w)_(?=\W|$)")


def _escape_prose(text):
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = _PROSE_MARKUP.sub(lambda m: "\\" + m.group(1) if m.group(1)
                                     else m.group(2) + "\\_", parts[i])
        if i and re.match(r"\w", parts[i]):
            parts[i] = "\\ " + parts[i]
    return "`".join(parts)


def _indent(line):
    return len(line) - len(line.lstrip())


def _to_rest(lines):
    out, prose, code_indent = [], [], None

    def flush_prose():
        out.extend(_escape_prose("\n".join(prose)).split("\n") if prose else [])
        prose.clear()

    for line in lines:
        if code_indent is not None and (not line.strip() or _indent(line) >= code_indent):
            out.append(line)                       # inside an indented example: verbatim
            continue
        if code_indent is not None and out[-1].strip():
            out.append("")                         # a literal block ends with a blank line
        code_indent = None
        said = [p for p in prose if p.strip()]
        if line.strip() and said and _indent(line) >= _indent(said[-1]) + 4:
            last = max(i for i, p in enumerate(prose) if p.strip())
            prose[last] += " ::"                   # the paragraph introduces a literal block
            flush_prose()
            out.extend(["", line])
            code_indent = _indent(line)
            continue
        if prose and prose[-1].strip() and line.strip() and _indent(line) != _indent(prose[-1]):
            prose.append("")
        prose.append(line)
    flush_prose()
    return out


NUMPY_DOCS = "https://numpy.org/doc/stable/reference/generated/{}.html"
ARRAY_API_DOCS = "https://data-apis.org/array-api/2023.12/API_specification/generated/array_api.{}.html"


def _borrowed_name(name):
    """For a function of fgrad.numpy or fgrad.array_api without a docstring of its
    own: a line pointing at the definition it follows (NumPy's or the standard's)."""
    import numpy
    if name.startswith("fgrad.numpy."):
        numpy_name = "numpy." + name.removeprefix("fgrad.numpy.")
        owner = numpy
        for part in numpy_name.split(".")[1:]:
            owner = getattr(owner, part, None)
        if owner is not None:
            return [f"NumPy's `{numpy_name}` on fgrad arrays (see `NumPy's documentation "
                    f"<{NUMPY_DOCS.format(numpy_name)}>`__; differences: :doc:`/sharp-bits`)."]
    if name.startswith("fgrad.array_api.") and name.count(".") == 2:
        short = name.rsplit(".", 1)[1]
        return [f"The standard's `{short}` (see `its specification "
                f"<{ARRAY_API_DOCS.format(short)}>`__)."]
    return []


def _plain_docstrings(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
    if not module.startswith("fgrad"):
        return
    if not any(line.strip() for line in lines) and what == "function":
        lines[:] = _borrowed_name(name)
        return
    lines[:] = _to_rest(lines)


def _skip_numpy_objects(app, what, name, obj, skip, options):
    # fgrad.numpy re-exports NumPy's dtypes, finfo/iinfo and constants; their
    # reference is NumPy's own.
    module = getattr(obj, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy."):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _plain_docstrings)
    app.connect("autodoc-skip-member", _skip_numpy_objects)
