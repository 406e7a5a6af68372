"""Compiling generated CUDA C to PTX with NVRTC, with or without a GPU.

Only CuPy's low-level binding (`cupy.cuda.nvrtc`) works without a device (the
high-level compile paths query it), so this is what the `nvrtc` tests and
`check_source` use; the launcher lets CuPy compile for the device it runs on.
"""
from .runtime import cupy

# A virtual architecture every CUDA 12 toolkit knows (Ampere and newer run its PTX).
DEFAULT_ARCH = "compute_80"
# --fmad=false: no contraction of a*b + c into an fma (NumPy rounds twice).
OPTIONS = ("--std=c++17", "--fmad=false")


class NvrtcError(RuntimeError):
    """NVRTC rejected a program: the message holds NVRTC's log and the numbered source."""


def numbered(source):
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(source.splitlines(), 1))


def compile_to_ptx(source, name="fgrad_kernels.cu", arch=DEFAULT_ARCH, options=OPTIONS):
    """PTX text for `source`; NvrtcError with the compiler's log and the source."""
    nvrtc = cupy().cuda.nvrtc
    prog = nvrtc.createProgram(source, name, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, (f"-arch={arch}",) + tuple(options))
        except nvrtc.NVRTCError as e:
            try:
                log = nvrtc.getProgramLog(prog)
            except nvrtc.NVRTCError:
                log = "(no log)"
            raise NvrtcError(f"NVRTC could not compile {name} ({e}):\n{log.strip()}\n"
                             f"--- source ---\n{numbered(source)}") from None
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return ptx.decode() if isinstance(ptx, bytes) else ptx
