"""fgrad: composable function transformations of NumPy programs."""
from fgrad._src.api import (ShapeDtypeStruct, grad, jvp, linear_transpose, linearize,  # noqa: F401
                            make_jaxpr, stop_gradient, value_and_grad, vjp)
from fgrad._src.checkpoint import checkpoint, remat  # noqa: F401
from fgrad._src.config import config  # noqa: F401
from fgrad._src.core import Array  # noqa: F401
from fgrad._src.default_float import default_float  # noqa: F401
from fgrad._src.cpu.disk_cache import clear as clear_disk_cache  # noqa: F401
from fgrad._src.cpu.disk_cache import info as disk_cache_info  # noqa: F401
from fgrad._src.devices import Device, device_put, devices  # noqa: F401
from fgrad._src.devices import default_backend, device_count, local_device_count  # noqa: F401
from fgrad._src.dlpack import from_dlpack  # noqa: F401
from fgrad._src.gpu import platform as _gpu_platform  # noqa: F401  (registers the GPU backend)
from fgrad._src.custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from fgrad._src.jacobians import hessian, jacfwd, jacrev  # noqa: F401
from fgrad._src.jit.api import jit  # noqa: F401
from fgrad._src.vmap_api import vmap  # noqa: F401
from fgrad import lax, numpy, tree  # noqa: F401,E402
from fgrad import nn  # noqa
from fgrad import random  # noqa: E402
from fgrad import debug  # noqa: F401,E402
from fgrad import distributed  # noqa: F401,E402  (mpi4py is imported on first use)
from fgrad._src.errors import (ArrayTooLargeError, ConcretizationError,  # noqa: F401
                               EscapedTracerError, FgradTypeError)

from fgrad._version import __version__  # noqa: F401,E402
