"""Run fgrad's benchmarks against its peers (`make bench`).

Every benchmark is a module in bench/ with NAME, TITLE and run(quick) -> Section.
All of them run in this one process, with one thread count for every library,
and the report goes to bench/results/<date>.md with a chart <date>.png.

    python bench/run.py                      # everything (in the peers' environment)
    python bench/run.py fused overhead       # only the named benchmarks
    python bench/run.py --quick              # short trial timings
    python bench/run.py --threads 1          # one thread for every library
"""
import argparse
import datetime
import importlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# In the order they run; add a module name here when adding a benchmark.
BENCHMARKS = ["fused", "mlp_sgd", "helmholtz", "overhead", "compile_time", "per_example",
              "resmlp", "gpu", "control_flow", "fft", "linalg", "cnn", "transformer",
              "lstm"]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of "
                                                 f"{', '.join(BENCHMARKS)})")
    parser.add_argument("--quick", action="store_true",
                        help="short trial timings (fewer repeats, smaller budgets)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for every library (default: BENCH_THREADS or all CPUs)")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="folder for <date>.md and <date>.png (default: bench/results)")
    parser.add_argument("--name", default=None,
                        help="file name without extension (default: today's date)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    return args


class LoadMonitor:
    """Samples the 1-minute load average every few seconds while the run lasts."""

    def __init__(self, every_s=5.0):
        self.samples, self._stop, self._every = [], threading.Event(), every_s
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.wait(self._every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class CpuShare:
    """How much of the machine's CPU time other processes used over an interval:
    (busy time of all CPUs from /proc/stat - this process's and its children's CPU
    time) / (wall time × CPUs). 0 on a quiet machine; None where /proc/stat is missing."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        import resource
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
        ours = sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
                   for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return time.perf_counter(), busy, ours

    def others(self):
        end = self._sample()
        if self.start is None or end is None:
            return None
        (t0, busy0, ours0), (t1, busy1, ours1) = self.start, end
        cpus = os.cpu_count() or 1
        return max(0.0, ((busy1 - busy0) - (ours1 - ours0)) / ((t1 - t0) * cpus))


def calibration_ms(repeat=15):
    """A fixed single-threaded workload (Python loop + small NumPy ops): per-run times
    in ms. Its min is close to the quiet-machine time; a median far above it, or a
    slower run at the end than at the start, shows interference from other work."""
    import numpy as np
    a = np.arange(4096, dtype=np.float64)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        total = 0
        for i in range(20_000):
            total += i * i
        for _ in range(200):
            a = np.sqrt(a * a + 1.0)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def contention_line(before, after, load_before, load_after, monitor, others):
    import statistics
    b_min, b_med = min(before), statistics.median(before)
    a_min, a_med = min(after), statistics.median(after)
    sampled = (f"; sampled during the run: mean {statistics.mean(monitor.samples):.2f}, max "
               f"{max(monitor.samples):.2f}" if monitor.samples else "")
    share = ("" if others is None else f"Other processes used {others:.0%} of the "
             f"{os.cpu_count()} CPUs' time during the run (per benchmark below). ")
    return (f"Machine contention: {share}1/5/15-min load average {_load(load_before)} before, "
            f"{_load(load_after)} after{sampled}. Calibration loop (single-threaded, "
            f"{len(before)} runs): before min {b_min:.2f} ms, median {b_med:.2f} ms; after min "
            f"{a_min:.2f} ms, median {a_med:.2f} ms ({a_med / b_min:.2f}× the quietest run). "
            f"A quiet machine: others near 0%, calibration near 1.0×.")


def busy_warning(others, n_threads):
    """A loud line when other processes took a noticeable share of the CPUs."""
    cpus = os.cpu_count() or 1
    spare = 1 - n_threads / cpus  # CPUs this run left to others
    if others is None or others <= spare + 0.1:
        return []
    return [f"- **Warning: a busy machine.** Other processes used {others:.0%} of the CPUs "
            f"while this run used {n_threads} of {cpus}; thread pools that spin (OpenBLAS, "
            f"OpenMP) slow down many times over when they lose a core. Do not quote these "
            f"numbers; rerun on a quiet machine"
            + (" (or with --threads 1 on a shared one)." if n_threads > 1 else ".")]


def _footer(section):
    others = getattr(section, "others", None)
    return f"{section.seconds:.0f} s" + ("" if others is None else
                                         f"; other processes used {others:.0%} of the CPUs")


def _load(triple):
    return "/".join(f"{v:.2f}" for v in triple)


def summary_table(sections):
    from common import fmt_ratio
    lines = ["| benchmark | case | fgrad (best variant) | best peer | fgrad / best peer |",
             "|---|---|---|---|---:|"]
    rows = []
    for section in sections:
        for table in section.tables:
            for row in table.summary():
                rows.append(row)
                lines.append(f"| {row['short']} | {row['case']} | {row['fgrad']} "
                             f"| {row['peer']} | {fmt_ratio(row['ratio'])} |")
    return "\n".join(lines), rows


def chart(rows, path, title):
    """A horizontal bar per row: fgrad / best peer on a log axis (left of 1: fgrad
    faster). Returns a line for the report."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "No chart: matplotlib is not installed in this environment."
    rows = [r for r in rows if r["ratio"] is not None]
    if not rows:
        return "No chart: no row has both an fgrad and a peer time."
    labels = [f"{r['short']}: {r['case']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.5))
    y = range(len(rows))[::-1]
    ax.barh(list(y), ratios, color=["#2a9d8f" if r < 1 else "#e76f51" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("fgrad time / best peer time (log scale; < 1: fgrad faster)")
    ax.set_title(title, fontsize=10)
    for yi, r in zip(y, ratios):
        ax.text(r, yi, f" {r:.2f}", va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"Chart: [{path.name}]({path.name})."


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        os.environ["BENCH_THREADS"] = str(args.threads)
    sys.path.insert(0, str(HERE))
    import threads  # noqa: F401  (before NumPy and every library)
    import common
    import peers

    started, whole_run = time.perf_counter(), CpuShare()
    load_before = os.getloadavg()
    before = calibration_ms()
    name = args.name or datetime.date.today().isoformat()
    if args.names and not args.name:     # a partial run never replaces the full report
        name += "-" + "-".join(args.names)
    sections = []
    with tempfile.TemporaryDirectory(prefix="fgrad-bench-cache-") as cache, LoadMonitor() as mon:
        os.environ["FGRAD_CACHE_DIR"] = cache  # compiled code of this run only
        for bench in args.names or BENCHMARKS:
            module = importlib.import_module(bench)
            t0, share = time.perf_counter(), CpuShare()
            section = module.run(quick=args.quick)
            section.seconds = time.perf_counter() - t0
            section.others = share.others()
            print(section.markdown(), f"({_footer(section)})\n", flush=True)
            sections.append(section)
    others = whole_run.others()
    after = calibration_ms()
    load_after = os.getloadavg()
    total = time.perf_counter() - started

    args.out.mkdir(parents=True, exist_ok=True)
    md_path, png_path = args.out / f"{name}.md", args.out / f"{name}.png"
    summary, rows = summary_table(sections)
    chart_line = chart(rows, png_path, f"fgrad / best peer, {name}"
                       + (" (quick trial)" if args.quick else ""))
    header = [
        f"# fgrad benchmarks against its peers, {name}", "",
        ("**Quick trial run** (fewer repeats, smaller budgets): not for quoting. "
         if args.quick else "") + f"Total {total / 60:.1f} min.", "",
        f"- Machine: {common.machine()}.",
        f"- Libraries: {peers.versions()}.",
        f"- Threads: {threads.describe()}.",
        f"- {contention_line(before, after, load_before, load_after, mon, others)}",
        *busy_warning(others, threads.COUNT),
        "- Timings: medians (and mins) of repeated runs after a warm-up call, so compilation "
        "is excluded except in benchmark 5. Every implementation's result was checked "
        "against a reference before it was timed.",
        "- Ratio: fgrad's best variant / the best peer; **bold** below 1 (fgrad faster). "
        "Limit columns (bandwidth, sgemm, NumPy by hand) are bounds, not competitors.", "",
        "## Summary", "", summary, "", chart_line, ""]
    body = [s.markdown() + f"\n({_footer(s)})\n" for s in sections]
    md_path.write_text("\n".join(header) + "\n" + "\n".join(body))
    print(f"Results written to {md_path}" + (f" and {png_path}" if "Chart:" in chart_line else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
