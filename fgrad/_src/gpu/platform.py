"""The GPU backend as a platform of the device registry (`placement`).

Importing this module registers the platform without importing CuPy; `runtime`
registers `cupy.ndarray` as a GPU array type when it loads CuPy.
"""
from .. import placement
from . import runtime


class GpuPlatform(placement.Platform):
    name = "gpu"
    aliases = ("cuda",)
    dlpack_device_type = 2      # kDLCUDA
    missing_hint = ("fgrad's GPU backend needs CuPy and an NVIDIA GPU; "
                    "pip install 'fgrad[gpu]'")

    def count(self):
        return runtime.gpu_count()

    def device_kind(self, device_id):
        name = runtime.cupy().cuda.runtime.getDeviceProperties(device_id)["name"]
        return name.decode() if isinstance(name, bytes) else name

    def device_id(self, value):
        return value.device.id

    def to_host(self, value):
        return value.get()

    def put(self, value, device_id):
        cp = runtime.cupy()
        if runtime.is_gpu_array(value) and value.device.id == device_id:
            return value
        with cp.cuda.Device(device_id):
            return cp.asarray(value)

    def from_dlpack(self, x, copy):
        value = runtime.cupy().from_dlpack(x)
        return value.copy() if copy else value

    def run_eager(self, prim, vals, params):
        from . import eager
        return eager.run(prim, vals, params)

    def compile(self, closed_jaxpr, name):
        from .executable import compile_gpu
        return compile_gpu(closed_jaxpr, name)


placement.register(GpuPlatform())
