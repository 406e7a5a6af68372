"""fgrad.scipy.linalg: SciPy's scipy.linalg over fgrad's linear-algebra primitives
(see fgrad._src.scipy.linalg for the semantics and the differences from SciPy)."""
from fgrad._src.numpy.linalg_ops import LinAlgError  # noqa: F401
from fgrad._src.scipy.linalg import (  # noqa: F401
    block_diag, cho_factor, cho_solve, cholesky, det, eigh, expm, inv, lu, lu_factor, lu_solve,
    qr, solve, solve_triangular, sqrtm, svd)

__all__ = sorted(n for n in globals() if not n.startswith("_"))
