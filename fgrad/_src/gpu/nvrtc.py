"""Compiling generated CUDA C with NVRTC, with or without a GPU.

Only CuPy's low-level binding (`cupy.cuda.nvrtc`) works without a device (the
high-level compile paths query it). The launcher uses it too, not CuPy's
RawModule: RawModule always adds `-ftz=true`, which flushes float32 subnormals
to zero (on an H200, `-x` of 4e-45 gave -0.0 and `bool(4e-45)` False), where
the host and NumPy keep them.
"""
from .runtime import cupy

# A virtual architecture every CUDA 12 toolkit knows (Ampere and newer run its PTX).
DEFAULT_ARCH = "compute_80"
# --fmad=false: no contraction of a*b + c into an fma (NumPy rounds twice);
# -ftz=false: float32 subnormals kept, as on the host (NVRTC's default, stated).
OPTIONS = ("--std=c++17", "--fmad=false", "-ftz=false")


class NvrtcError(RuntimeError):
    """NVRTC rejected a program: the message holds NVRTC's log and the numbered source."""


def numbered(source):
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(source.splitlines(), 1))


def compile_to_ptx(source, name="fgrad_kernels.cu", arch=DEFAULT_ARCH, options=OPTIONS):
    """PTX text for `source`; NvrtcError with the compiler's log and the source."""
    ptx = _compile(source, name, arch, options, "getPTX")
    return ptx.decode() if isinstance(ptx, bytes) else ptx


def compile_to_cubin(source, name, arch, options=OPTIONS):
    """Machine code (an ELF cubin) for a real architecture such as 'sm_90'."""
    return _compile(source, name, arch, options, "getCUBIN")


def _compile(source, name, arch, options, fetch):
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
        return getattr(nvrtc, fetch)(prog)
    finally:
        nvrtc.destroyProgram(prog)
