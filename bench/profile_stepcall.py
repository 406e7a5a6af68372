"""Where a jitted training step's call spends its time outside the native program.

    bench/.venv-peers/bin/python bench/profile_stepcall.py [--calls 20] [--repeats 5]

For the transformer benchmark's step and ResMLP's donated step: per call, the
whole jitted call; the compiled program alone on the same inputs (its kernel
calls, `run_steps`); the difference (flattening the pytrees, the cache lookup,
allocating outputs, donation, wrapping and unflattening the outputs); and the
minor page faults per call. Each time is the min over --repeats runs of
--calls calls, as wall time and as the process's CPU time (a busy machine
inflates the first; the second counts fgrad's worker threads too, spinning
included: with BENCH_THREADS=1 it is the work alone). Then the call's parts
outside the program, each timed alone on this thread's CPU time. A
development tool: it reaches into fgrad's jit internals.
"""
import argparse
import resource
import time
import timeit

import common  # noqa: F401  # (first: thread settings)
import numpy as np

import fgrad
import resmlp
import transformer
from fgrad._src import tree_util
from fgrad._src.jit import api
from fgrad._src.jit.slots import run_steps


def resmlp_step():
    """ResMLP's donated jitted step, its first state and batches."""
    step, model, opt_state = resmlp.fgrad_train_step(donate=True)
    return step, (model, opt_state), resmlp.batches


def transformer_step():
    step, model, opt_state = transformer.fgrad_train_step()
    return step, (model, opt_state), transformer.batches


def _best(fn, calls, repeats, timer):
    return min(timeit.Timer(fn, timer=timer).repeat(number=calls, repeat=repeats)) / calls


def profile(name, make, calls, repeats):
    step, state, batches = make()
    data = batches(3)
    state = [state]
    for x, y in data[:2]:                       # compile, then one warm call
        *new, loss = step(*state[0], x, y)
        state[0] = tuple(new)
    x, y = data[2]

    def call():
        *new, loss = step(*state[0], x, y)
        state[0] = tuple(new)
        np.asarray(loss)

    entry = next(iter(step._cache.values()))
    exe = entry.executable
    leaves, tree = tree_util.flatten(((*state[0], x, y), api._NO_KWARGS))
    raw, key = api._raw_leaves(leaves)
    env = exe.template.copy()
    for slot, value in zip(exe.in_slots, raw):
        env[slot] = np.array(value)             # copies: the program may write donated inputs
    del raw, leaves                             # (the donated call would copy them)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        call()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls
    print(f"\n{name}: {len(exe.in_slots)} input leaves, {len(exe.calls)} program calls, "
          f"{faults:.0f} minor page faults a call")
    for clock, timer in [("wall", time.perf_counter), ("process CPU", time.process_time)]:
        whole = _best(call, calls, repeats, timer)
        program = _best(lambda: run_steps(exe.calls, env), calls, repeats, timer)
        print(f"  {clock:>11}: call {whole * 1e3:8.3f} ms, program {program * 1e3:8.3f} ms, "
              f"outside {(whole - program) * 1e3:7.3f} ms")
    outs = [fgrad.numpy.asarray(env[i]) for i in exe.out_refs]
    leaves = tree_util.flatten(((*state[0], x, y), api._NO_KWARGS))[0]
    parts = [("flatten the arguments", lambda: tree_util.flatten(((*state[0], x, y),
                                                                   api._NO_KWARGS))),
             ("leaf values and cache key", lambda: api._raw_leaves(leaves)),
             ("cache lookup", lambda: step._cache.get((tree, (), key, api.default_float_dtype()))),
             ("unflatten the outputs", lambda: tree_util.unflatten(entry.out_tree, outs))]
    for label, fn in parts:
        print(f"  {label:>28}: {_best(fn, 200, repeats, time.thread_time) * 1e6:7.1f} us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (min taken)")
    opts = parser.parse_args()
    profile("ResMLP step (donated)", resmlp_step, opts.calls, opts.repeats)
    profile("transformer step", transformer_step, max(2, opts.calls // 10), opts.repeats)


if __name__ == "__main__":
    main()
