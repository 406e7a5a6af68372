"""Per-kernel times of a benchmark's jitted program: the transformer's training
step (bench/transformer.py), with --step resnet the ResNet block's forward and
backward (bench/cnn.py), with --step resmlp the ResMLP AdamW step (bench/resmlp.py)
or with --step mlp1024 the MLP SGD step at batch 1024 (bench/mlp_sgd.py).

    bench/.venv-peers/bin/python bench/profile_kernels.py [--step resmlp] [--top 40] [--repeats 5]

The step is compiled with every native kernel as a segment of its own (a big
kernel still shares fgrad's worker threads; nothing else joins its call), run
once so that every intermediate value exists, then each call is timed alone
on those values (the min of --repeats; a kernel writing into a donated input
does so each time). The slowest calls are listed with
their operand and result shapes, then the totals by kernel label and the share
of matrix products. A development tool: it reaches into fgrad's jit internals,
and on a busy machine only the shares mean much.
"""
import argparse
import collections
import time

import common  # noqa: F401  # (first: thread settings)
import numpy as np

import fgrad
import transformer
from fgrad._src.cpu import program
from fgrad._src.jit import executable
from fgrad._src.jit.primitive import compile_jaxpr
from fgrad._src.jit.slots import run_steps


def _one_kernel_segments(steps, fits, program_outs, min_kernels=2, alone=None):
    """plan_segments with each native kernel a segment of its own."""
    readers = {}
    for i, step in enumerate(steps):
        for a in program._arrays_read(step):
            if type(a) is program.Var:
                readers.setdefault(a, set()).add(i)
    return [program._segment([i], steps, readers, program_outs)
            for i, step in enumerate(steps) if fits(step) and not program.is_alias(step)]


def kernel_times(jitted, args, repeats):
    """[(seconds, label, result shapes)] per call of `jitted`'s program at `args`."""
    planned = executable.plan_segments
    executable.plan_segments = _one_kernel_segments
    lowered = jitted.lower(*args)
    try:   # (donated inputs as the step donates them: its updates run in place)
        exe = compile_jaxpr(lowered.jaxpr, "profiled", lowered._entry.donated)
    finally:
        executable.plan_segments = planned
    env = exe.template.copy()
    for slot, value in zip(exe.in_slots, fgrad.tree.leaves(args)):
        env[slot] = np.asarray(value)
    run_steps(exe.calls, env)
    members = collections.defaultdict(list)
    for k in exe.kernels:
        if k.segment is not None:
            members[k.segment].append(k.label)
    rows = []
    for call in exe.calls:
        ins = [env[i] for i in call.ins]
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            call.fn(*ins, **call.params)
            best = min(best, time.perf_counter() - start)
        label = call.label
        if label.startswith("native:segment "):
            label = " | ".join(members[int(label.split()[-1])])
        rows.append((best, label, [np.shape(env[i]) for i in call.outs]))
    return rows


def transformer_step():
    """The benchmark's jitted step and its first arguments."""
    step, model, opt_state = transformer.fgrad_train_step()
    return step, (model, opt_state, *transformer.batches(1)[0])


def resnet_step():
    """bench/cnn.py's jitted ResNet block gradient and its arguments."""
    import cnn
    x, g = cnn.res_data()
    return cnn.res_block_grad(g), (cnn.res_params(), x)


def resmlp_step():
    """bench/resmlp.py's jitted AdamW step (donated) and its first arguments."""
    import resmlp
    step, model, opt_state = resmlp.fgrad_train_step(True)
    return step, (model, opt_state, *resmlp.batches(1)[0])


def mlp1024_step():
    """bench/mlp_sgd.py's jitted SGD step at batch 1024 and its arguments."""
    import mlp_sgd
    rng = np.random.default_rng(1024)
    params = mlp_sgd.init_params(rng)
    x = rng.standard_normal((1024, 784)).astype(np.float32)
    return fgrad.jit(mlp_sgd.fgrad_step), (params, x, rng.integers(0, 10, 1024))


STEPS = {"transformer": transformer_step, "resnet": resnet_step, "resmlp": resmlp_step,
         "mlp1024": mlp1024_step}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", choices=sorted(STEPS), default="transformer",
                        help="which benchmark's program")
    parser.add_argument("--top", type=int, default=40, help="slowest calls listed")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per call")
    opts = parser.parse_args()
    rows = kernel_times(*STEPS[opts.step](), opts.repeats)
    total = sum(t for t, _, _ in rows)
    print(f"{len(rows)} calls, {total * 1e3:.1f} ms in all (each call alone)")
    for t, label, shapes in sorted(rows, key=lambda r: -r[0])[:opts.top]:
        print(f"{t * 1e3:8.3f} ms  {label[:100]}  -> {shapes}")
    by_label = collections.Counter()
    for t, label, _ in rows:
        by_label[label.split(" (")[0]] += t
    print("\nby kernel label:")
    for label, t in by_label.most_common(opts.top):
        print(f"{t * 1e3:8.3f} ms  {100 * t / total:5.1f}%  {label[:100]}")


if __name__ == "__main__":
    main()
