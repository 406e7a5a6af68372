"""The GPU backend: fused CUDA C kernels compiled by NVRTC and launched with CuPy.

CuPy is optional: nothing here imports it until a GPU array is made or a
kernel is compiled (see `runtime`). The pieces, bottom up:
  runtime     -- the lazy CuPy import and the cheap "is this a GPU array" test
  layout      -- operand strides over a group's domain, collapsed loops
  cuda_c      -- CUDA C source for `compiler.fusion.Fused` groups
  nvrtc       -- compiling that source with NVRTC to PTX or a cubin (no device needed)
  launch      -- loading the compiled module per device; kernel calls sized by the problem
  ops         -- the steps that are not fused kernels (cuBLAS, CuPy, host)
  executable  -- a jaxpr as a plan of GPU steps (what `jit` runs on GPU inputs)
  eager       -- eager primitives on GPU arrays
  platform    -- the backend's entry in the device registry (`placement`)
"""
