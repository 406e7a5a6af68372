"""A small LLVM IR kernel for the engine and disk-cache tests."""

# out[i] = x[i] * scale, with args = [n, x, out] and `scale` baked in.
KERNEL = r"""
define void @scale(ptr noalias %args) {
entry:
  %n = load i64, ptr %args
  %p1 = getelementptr inbounds i64, ptr %args, i64 1
  %xa = load i64, ptr %p1
  %p2 = getelementptr inbounds i64, ptr %args, i64 2
  %oa = load i64, ptr %p2
  %x = inttoptr i64 %xa to ptr
  %o = inttoptr i64 %oa to ptr
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %done
loop:
  %i = phi i64 [0, %entry], [%i2, %loop]
  %px = getelementptr inbounds double, ptr %x, i64 %i
  %v = load double, ptr %px
  %w = fmul double %v, SCALE
  %po = getelementptr inbounds double, ptr %o, i64 %i
  store double %w, ptr %po
  %i2 = add i64 %i, 1
  %c = icmp slt i64 %i2, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}
"""


def kernel(scale=2.0):
    """The kernel's IR with `scale` baked in."""
    return KERNEL.replace("SCALE", repr(float(scale)))
