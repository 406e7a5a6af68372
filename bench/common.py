"""What every benchmark shares: thread settings (imported first), the machine line,
timing with warm-up, agreement checks, and tables whose last column is the ratio
of fgrad's best time to the best peer's.

A benchmark module has NAME, TITLE and run(quick=False) returning a `Section`
(tables and notes); `bench/run.py` runs them and writes the results file.
"""
import os
import platform
import statistics
import sys
import time
import timeit
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import threads  # noqa: E402,F401  # (sets the thread counts before NumPy loads)

import numpy as np  # noqa: E402

try:
    import fgrad  # noqa: E402
except ImportError:  # a source checkout run without an install
    sys.path.insert(0, str(HERE.parent))
    import fgrad  # noqa: E402

def machine():
    """The Python, NumPy and fgrad versions, the CPU model, its vector extensions
    and CPU count, for the results header."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            info = {key.strip(): value for key, _, value in
                    (line.partition(":") for line in f.read().split("\n\n")[0].splitlines())}
        cpu = info.get("model name", cpu).strip()
        flags = set(info.get("flags", "").split())
    except OSError:
        pass
    vector = vector_extensions(flags)
    return (f"Python {platform.python_version()}, NumPy {np.__version__}, "
            f"fgrad {fgrad.__version__}, {cpu}{f' with {vector}' if vector else ''}, "
            f"{os.cpu_count()} CPUs")


def vector_extensions(flags):
    """The widest x86 vector extensions among /proc/cpuinfo `flags`, e.g.
    "AVX-512 (F, BW, DQ, VL)", "AVX2 + FMA" or "SSE4.2"; "" when none is known."""
    if "avx512f" in flags:
        parts = [name for name, flag in (("F", "avx512f"), ("BW", "avx512bw"), ("DQ", "avx512dq"),
                                         ("VL", "avx512vl"), ("FP16", "avx512_fp16"))
                 if flag in flags]
        return f"AVX-512 ({', '.join(parts)})"
    if "avx2" in flags:
        return "AVX2 + FMA" if "fma" in flags else "AVX2"
    if "avx" in flags:
        return "AVX"
    return next((name for name, flag in (("SSE4.2", "sse4_2"), ("NEON", "asimd")) if flag in flags),
                "")


# ----------------------------------------------------------------------------
# Timing

@dataclass
class Timing:
    """Per-call seconds: median and min over `repeats` runs of `calls` calls each."""
    median: float
    min: float
    repeats: int = 1
    calls: int = 1


def time_call(fn, repeat=7, budget_s=0.5):
    """A Timing of fn after two warm-up calls (compilation, caches). Fast calls run
    in `repeat` batches of n calls, n sized so that all take about `budget_s`; a
    slow call runs `repeat` times once each (down to 3 times where that would take
    more than 3 budgets)."""
    fn()
    once = _once(fn)
    if once * repeat >= budget_s:
        repeat = max(3, min(repeat, int(3 * budget_s / once)))
        times, n = [_once(fn) for _ in range(repeat)], 1
    else:
        n = max(1, int(budget_s / repeat / max(once, 1e-9)))
        times = [t / n for t in timeit.Timer(fn).repeat(repeat=repeat, number=n)]
    return Timing(statistics.median(times), min(times), repeat, n)


def _once(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def budget(quick, full_s, repeat=7):
    """(repeat, budget_s) for a row: small for --quick trial runs."""
    return (3, full_s / 5) if quick else (repeat, full_s)


# ----------------------------------------------------------------------------
# Agreement

class Disagrees(AssertionError):
    """An implementation's result differs from the reference."""


def agree(what, got, expected, rtol, atol):
    """Assert two pytrees of arrays agree (np.testing.assert_allclose per leaf)."""
    import optree
    got_leaves = optree.tree_leaves(got)
    exp_leaves = optree.tree_leaves(expected)
    if len(got_leaves) != len(exp_leaves):
        raise Disagrees(f"{what}: {len(got_leaves)} outputs, expected {len(exp_leaves)}")
    for i, (g, e) in enumerate(zip(got_leaves, exp_leaves)):
        g, e = to_numpy(g), to_numpy(e)
        try:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        except AssertionError as err:
            detail = [ln for ln in str(err).splitlines() if "Max" in ln or "shape" in ln]
            raise Disagrees(f"{what}, output {i}: {'; '.join(detail) or 'differs'}") from None


def to_numpy(x):
    """A NumPy array from an fgrad, JAX or PyTorch value."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# ----------------------------------------------------------------------------
# Tables

FGRAD, PEER, LIMIT, INFO = "fgrad", "peer", "limit", "info"


@dataclass
class Column:
    name: str
    kind: str  # FGRAD, PEER, LIMIT (a bound, not a competitor) or INFO (shown only)


@dataclass
class Table:
    """Rows of cases × columns of implementations. A cell is a Timing, a number
    already in the table's unit (e.g. a ratio), a string (why it is empty: 'not
    installed', 'skipped: ...', 'wrong: ...') or None. `scale` converts seconds to
    the unit shown, or `show(seconds)` does (e.g. samples/s); either way
    cells rank by time (smaller is better), so fgrad / best peer < 1 means
    fgrad is faster."""
    title: str
    columns: list
    unit: str = "ms"
    scale: float = 1e3
    note: str = ""
    rows: list = field(default_factory=list)  # (case, {column: cell}, extra note)
    show: object = None  # optional fn(seconds) -> value in `unit`
    short: str = ""  # a label for the summary and the chart (default: the title)

    def add(self, case, cells, note=""):
        unknown = set(cells) - {c.name for c in self.columns}
        if unknown:
            raise KeyError(f"{self.title}: no columns {sorted(unknown)}")
        self.rows.append((case, cells, note))

    def _value(self, seconds):
        return self.show(seconds) if self.show else seconds * self.scale

    def best(self, cells, kind):
        """(column name, cell) of the smallest timed cell of that kind, or None."""
        timed = [(c.name, cells[c.name]) for c in self.columns
                 if c.kind == kind and _rank(cells.get(c.name)) is not None]
        return min(timed, key=lambda p: _rank(p[1])) if timed else None

    def ratio(self, cells):
        f, p = self.best(cells, FGRAD), self.best(cells, PEER)
        return _rank(f[1]) / _rank(p[1]) if f and p else None

    def markdown(self):
        head = [c.name + (" (limit)" if c.kind == LIMIT else "") for c in self.columns]
        lines = [f"### {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines += ["| case | " + " | ".join(head) + " | best peer | fgrad / best peer | note |",
                  "|---|" + "---:|" * len(head) + "---|---:|---|"]
        for case, cells, note in self.rows:
            shown = [self._cell(cells.get(c.name)) for c in self.columns]
            peer = self.best(cells, PEER)
            r = self.ratio(cells)
            lines.append(f"| {case} | " + " | ".join(shown) +
                         f" | {peer[0] if peer else '–'} | {fmt_ratio(r)} | {note} |")
        if any(isinstance(c, Timing) for _, cells, _ in self.rows for c in cells.values()):
            best = "best" if self.show else "min"
            lines += ["", f"Cells: median ({best}) in {self.unit}"
                      + (" per call" if self.unit in ("ms", "µs", "s") else "") + "."]
        return "\n".join(lines)

    def _cell(self, cell):
        if cell is None:
            return "–"
        if isinstance(cell, str):
            return cell
        if not isinstance(cell, Timing):
            return fmt_num(cell)
        med, best = self._value(cell.median), self._value(cell.min)
        return f"{fmt_num(med)} ({fmt_num(best)})"

    def summary(self):
        """One dict per row: table, case, fgrad and best peer as 'column: value unit'
        text, and the ratio (None without both)."""
        out = []
        for case, cells, _ in self.rows:
            f, p = self.best(cells, FGRAD), self.best(cells, PEER)
            out.append(dict(table=self.title, short=self.short or self.title, case=case,
                            fgrad=self._named(f), peer=self._named(p),
                            ratio=self.ratio(cells)))
        return out

    def _named(self, pair):
        if pair is None:
            return "–"
        name, cell = pair
        value = self._value(cell.median) if isinstance(cell, Timing) else cell
        return f"{name}: {fmt_num(value)} {self.unit}"


def _rank(cell):
    """What a cell is compared by: a Timing's median, a number itself, else None."""
    if isinstance(cell, Timing):
        return cell.median
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return float(cell)
    return None


def fmt_num(v):
    """Three significant digits, or a whole number from 100 on."""
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def fmt_ratio(r):
    return "–" if r is None else f"**{r:.2f}**" if r < 1 else f"{r:.2f}"


@dataclass
class Section:
    """A benchmark's part of the report: its tables and lines of notes."""
    title: str
    tables: list
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    others: float = None  # share of the CPUs other processes used meanwhile (run.py)

    def markdown(self):
        parts = [f"## {self.title}", ""]
        for t in self.tables:
            md = t.markdown()
            if t.title == self.title:  # a one-table section needs one heading
                md = md.split("\n", 2)[2]
            parts += [md, ""]
        parts += [f"- {n}" for n in self.notes]
        return "\n".join(parts).rstrip() + "\n"


def guarded(fn):
    """fn() or the text of its failure, for a cell: one broken peer never stops a run."""
    try:
        return fn()
    except Disagrees as e:
        return f"wrong: {e}"
    except Exception as e:  # noqa: BLE001 - reported in the table
        text = str(e).splitlines()[0][:100] if str(e) else ""
        return f"failed: {type(e).__name__}: {text}".replace("|", "/")


def measure(what, fn, expected=None, rtol=1e-5, atol=1e-6, repeat=7, budget_s=0.5):
    """Check fn() against `expected` (when given), then time it: a Timing, or the
    text saying why not (disagreement, exception) for the table cell."""
    def go():
        if expected is not None:
            agree(what, fn(), expected, rtol, atol)
        return time_call(fn, repeat, budget_s)
    return guarded(go)


def main_for(run, title):
    """Run one benchmark on its own (python3 bench/NAME.py [--quick]); print its Markdown."""
    import argparse
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="short trial timings")
    args = parser.parse_args()
    print(run(quick=args.quick).markdown())
