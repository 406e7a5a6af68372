"""Running the GPU backend's generated CUDA C on the host, for tests without a GPU.

The kernels are compiled as C++20 by the host compiler with a small header that
provides what they use from CUDA: thread/block indices, `__syncthreads` (a
barrier per block), `__shfl_down_sync` (a barrier per warp and a slot per lane,
out-of-range lanes returning the caller's value, as on the GPU), bit casts and
popcounts. A launch runs its blocks one after another, each block's threads as
real threads, so the grid-stride loops, the block reductions and the chunked
reductions with their finishing kernels all run as written. Math functions are
the host's libm (correctly rounded or within an ulp), not CUDA's.

This checks the generated code's semantics (index arithmetic, broadcasting,
views, reductions, each primitive's edge cases) in CI; a GPU run is still what
checks CUDA's own math functions and the launch itself.
"""
import ctypes
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HEADER = r"""
#include <barrier>
#include <cmath>
#include <cstring>
#include <math.h>
#include <memory>
#include <thread>
#include <vector>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
static std::barrier<>* fg_block_barrier;
static std::barrier<>* fg_warp_barrier[32];
static unsigned long long fg_lanes[32][32];
inline void __syncthreads() { fg_block_barrier->arrive_and_wait(); }
template <class T> T __shfl_down_sync(unsigned, T v, int d) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::memcpy(&fg_lanes[warp][lane], &v, sizeof(T));
  fg_warp_barrier[warp]->arrive_and_wait();
  T r = v;
  if (lane + d < 32) std::memcpy(&r, &fg_lanes[warp][lane + d], sizeof(T));
  fg_warp_barrier[warp]->arrive_and_wait();
  return r;
}
inline float __uint_as_float(unsigned b) { float f; std::memcpy(&f, &b, 4); return f; }
inline double __longlong_as_double(long long b) { double f; std::memcpy(&f, &b, 8); return f; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
template <class T> T min(T a, T b) { return a < b ? a : b; }
template <class F> void fg_launch(unsigned grid, unsigned block, F kernel) {
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 0, 0};
    std::barrier<> bb(block);
    fg_block_barrier = &bb;
    std::vector<std::unique_ptr<std::barrier<>>> wb;
    for (unsigned w = 0; w < block / 32; ++w) {
      wb.emplace_back(new std::barrier<>(32));
      fg_warp_barrier[w] = wb.back().get();
    }
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t)
      ts.emplace_back([&kernel, t] { threadIdx = {t, 0, 0}; kernel(); });
    for (auto& th : ts) th.join();
  }
}
"""

GRID, BLOCK = 3, 64      # a few small blocks: grid-stride loops and block reductions both run

_SIGNATURE = re.compile(r'extern "C" __global__ void (\w+)\(([^)]*)\)')


def available():
    """Whether a host C++20 compiler with <barrier> is here."""
    return shutil.which("g++") is not None


def _wrappers(source):
    """extern "C" launchers fg_run_<kernel>(void** args) for every kernel in source."""
    out = []
    for name, params in _SIGNATURE.findall(source):
        types = [p.rsplit(" ", 1)[0].replace("__restrict__", "").strip()
                 for p in params.split(",") if p.strip() and p.strip() != "void"]
        args = ", ".join(f"({t})a[{i}]" for i, t in enumerate(types))
        out.append(f'extern "C" void fg_run_{name}(void** a, unsigned grid, unsigned block) '
                   f'{{ fg_launch(grid, block, [&] {{ {name}({args}); }}); }}')
    return "\n".join(out)


class HostKernels:
    """A shared library built from generated CUDA C (without its PRELUDE repeated)."""

    def __init__(self, prelude, bodies):
        src = HEADER + prelude + "\n".join(bodies) + "\n" + _wrappers("\n".join(bodies))
        self._dir = tempfile.mkdtemp(prefix="fgrad-cuda-emu-")
        path = Path(self._dir)
        (path / "k.cpp").write_text(src)
        proc = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                               "-w", "-o", str(path / "k.so"), str(path / "k.cpp")],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"host compile of the generated CUDA C failed:\n"
                               f"{proc.stderr[-4000:]}")
        self.lib = ctypes.CDLL(str(path / "k.so"))

    def launch(self, name, arrays, grid=GRID, block=BLOCK):
        fn = getattr(self.lib, f"fg_run_{name}")
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        fn(ptrs, ctypes.c_uint(grid), ctypes.c_uint(block))

    def close(self):
        shutil.rmtree(self._dir, ignore_errors=True)


def run_kernel(kernels, plan, group, inputs):
    """What launch.kernel_caller does, on the host: the group's outputs."""
    outs_spec = [(tuple(v.aval.shape), v.aval.dtype) for v in group.outputs]
    if plan.size == 0:
        return [np.zeros(s, d) for s, d in outs_spec]
    ins = [np.ascontiguousarray(x) for x in inputs]
    outs = [np.empty(s, d) for s, d in outs_spec]
    extra = []
    partial = err = None
    if plan.chunks > 1:
        partial = np.empty(plan.work, plan.partial_dtype)
        extra.append(partial)
    if plan.reports_error:
        err = np.zeros(1, np.int32)
        extra.append(err)
    kernels.launch(plan.entry, ins + outs + extra)
    if partial is not None:
        red = next(j for j, v in enumerate(group.outputs) if v is group.eqns[-1].outvars[0])
        kernels.launch(plan.finish, [partial, outs[red]])
    if err is not None and err[0]:
        raise ValueError("invalid entry in choice array")
    return outs
