"""Per-kernel times of the ResNet basic block's jitted forward + backward (bench/cnn.py).

    bench/.venv-peers/bin/python bench/profile_resnet.py [--top 40] [--repeats 5]

As profile_kernels.py (whose kernel_times it uses) for the transformer step: each
native kernel timed alone on the values of one run, the slowest calls, then the
totals by kernel label. Only the shares mean much on a busy machine.
"""
import argparse
import collections

import common  # noqa: F401  # (first: thread settings)

import cnn
from profile_kernels import kernel_times


def resnet_step():
    """The benchmark's jitted block gradient and its arguments."""
    x, g = cnn.res_data()
    return cnn.res_block_grad(g), (cnn.res_params(), x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=40, help="slowest calls listed")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per call")
    opts = parser.parse_args()
    rows = kernel_times(*resnet_step(), opts.repeats)
    total = sum(t for t, _, _ in rows)
    print(f"{len(rows)} calls, {total * 1e3:.1f} ms in all (each call alone)")
    for t, label, shapes in sorted(rows, key=lambda r: -r[0])[:opts.top]:
        print(f"{t * 1e3:8.3f} ms  {label[:110]}  -> {shapes}")
    by_label = collections.Counter()
    for t, label, _ in rows:
        by_label[label.split(" (")[0]] += t
    print("\nby kernel label:")
    for label, t in by_label.most_common(opts.top):
        print(f"{t * 1e3:8.3f} ms  {100 * t / total:5.1f}%  {label[:110]}")


if __name__ == "__main__":
    main()
