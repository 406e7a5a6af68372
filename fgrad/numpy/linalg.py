"""fgrad.numpy.linalg: NumPy's numpy.linalg over fgrad's linear-algebra primitives
(see fgrad._src.numpy.linalg_ops for the semantics and how degenerate inputs behave)."""
from fgrad._src.numpy.linalg_ops import (  # noqa: F401
    EigResult, EighResult, LinAlgError, LstsqResult, QRResult, SlogdetResult, SVDResult,
    cholesky, cond, cross, det, diagonal, eig, eigh, eigvals, eigvalsh, inv, lstsq, matmul,
    matrix_norm, matrix_power, matrix_rank, matrix_transpose, multi_dot, norm, outer, pinv, qr,
    slogdet, solve, svd, svdvals, tensordot, tensorinv, tensorsolve, trace, vecdot, vector_norm)

__all__ = sorted(n for n in globals() if not n.startswith("_"))
