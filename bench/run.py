"""Run fgrad's benchmarks (`make bench`).

Each benchmark is a module in bench/ with NAME, TITLE and run() -> Markdown.
Its report is printed and written to bench/results/<NAME>.md; all of them
together go to bench/results/summary.md.

    python3 bench/run.py                    # every benchmark
    python3 bench/run.py eager_overhead     # only the named ones
"""
import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# In the order they run; add a module name here when adding a benchmark.
BENCHMARKS = ["eager_overhead", "per_example", "jit_cpu"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of "
                                                 f"{', '.join(BENCHMARKS)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")

    sys.path.insert(0, str(HERE))
    RESULTS.mkdir(exist_ok=True)
    reports = []
    for name in args.names or BENCHMARKS:
        module = importlib.import_module(name)
        start = time.perf_counter()
        report = module.run()
        print(report)
        print(f"({name}: {time.perf_counter() - start:.1f} s)\n", flush=True)
        (RESULTS / f"{name}.md").write_text(report)
        reports.append(report)

    summary = "# fgrad benchmark results\n\n" + "\n".join(reports)
    (RESULTS / "summary.md").write_text(summary)
    print(f"Results written to {RESULTS}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
