"""The NaN/Inf origin finder (`config.update("debug_nans", True)` or
FGRAD_DEBUG_NANS=1).

When on, every eagerly executed primitive has its outputs checked: a NaN or Inf
made from finite inputs raises `DebugNansError` naming the primitive, its
inputs, a few offending elements and the user's source line that created the
operation (for work a derivative rule does in the backward pass: the forward
operation it differentiates). Outputs of a compiled (jit) program are checked
too; when one is non-finite the program is run again op by op to find the
equation that made it. Off, it costs nothing: the eager path tests one global.
"""
import numpy as np

from .. import core
from ..config import config
from ..dtypes import short_name
from ..errors import provenance, source_info
from ..jaxpr import Literal

MAX_SHOWN = 3


class DebugNansError(FloatingPointError):
    """A primitive produced NaN or Inf from finite inputs (debug_nans is on).
    `primitive` names it; `source_info` is where it was created (or None)."""

    def __init__(self, message, primitive=None, source_info=None):
        super().__init__(message)
        self.primitive = primitive
        self.source_info = source_info


def _nonfinite(x):
    x = np.asarray(x)
    return x.dtype.kind in "fc" and not np.isfinite(x).all()


def check_output(prim, values, out, params):
    """core's output check: raise if `prim` made a NaN/Inf from finite `values`."""
    outs = out if prim.multiple_results else (out,)
    if not any(_nonfinite(o) for o in outs) or any(_nonfinite(v) for v in values):
        return
    if prim.name == "jit":
        _locate(params["jaxpr"], values, params["name"])
    raise _error(prim, values, outs)


def check_program(closed, inputs, outputs, name):
    """After a jitted program ran: find the origin of a non-finite output."""
    if not any(_nonfinite(o) for o in outputs) or any(_nonfinite(v) for v in inputs):
        return
    _locate(closed, inputs, name)
    raise DebugNansError(
        f"debug_nans: the compiled program {name!r} produced NaN/Inf from finite inputs, "
        f"but running it op by op did not (native code and NumPy differ here); outputs: "
        f"{', '.join(_describe_value(o) for o in outputs)}", "jit")


def _locate(closed, inputs, name):
    """Run a jaxpr eagerly, op by op with checks on, each equation's work carrying
    its source info; raises DebugNansError at the first bad equation. Effectful
    equations (callbacks, prints) are skipped: they already ran once."""
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, inputs))
    outer = provenance.info
    try:
        with core.set_current_trace(core.eval_trace):
            for eqn in jaxpr.eqns:
                if eqn.primitive.effectful:
                    continue
                provenance.info = eqn.source_info or outer
                ins = [a.val if type(a) is Literal else env[a] for a in eqn.invars]
                outs = eqn.primitive.bind(*ins, **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs = [outs]
                env.update(zip(eqn.outvars, outs))
    finally:
        provenance.info = outer


def _error(prim, values, outs):
    info = source_info()
    found = {kind for o in outs for kind in _kinds(o)}
    what = " and ".join(k for k in ("NaN", "Inf") if k in found)
    lines = [f"debug_nans: {prim.name} produced {what} from finite inputs"]
    if info is not None:
        if info.backward:
            lines.append(f"  in the backward pass: a derivative rule of the operation created at "
                         f"{info}")
        else:
            lines.append(f"  at {info}")
        code = info.code()
        if code:
            lines.append(f"      {code}")
    lines.append("  inputs: " + (", ".join(_describe_value(v) for v in values) or "none"))
    lines += _offending(prim, values, outs)
    if info is not None and info.backward:
        lines.append("  hint: a derivative that is infinite at this input (sqrt or log at 0, "
                     "x/y at y = 0) times a zero cotangent gives NaN, e.g. when the operation "
                     "sits in the unused branch of a `where`; make its input safe first "
                     "(the double-where trick: fnp.where(ok, x, safe_value) inside, "
                     "fnp.where(ok, f(x), other) outside).")
    else:
        lines.append("  hint: check the inputs against the operation's domain (log or sqrt "
                     "of negatives, 0/0, inf - inf, overflow of exp).")
    return DebugNansError("\n".join(lines), prim.name, info)


def _kinds(x):
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        return ()
    kinds = []
    if np.isnan(x).any():
        kinds.append("NaN")
    if np.isinf(x).any():
        kinds.append("Inf")
    return kinds


def _describe_value(x):
    x = np.asarray(x)
    return f"{short_name(x.dtype)}[{','.join(map(str, x.shape))}]"


def _offending(prim, values, outs):
    """A few (index, inputs -> output) lines for the non-finite elements."""
    lines = []
    for k, o in enumerate(outs):
        o = np.asarray(o)
        if o.dtype.kind not in "fc":
            continue
        bad = np.argwhere(~np.isfinite(o))
        label = f"output {k} " if len(outs) > 1 else ""
        for idx in (tuple(int(i) for i in row) for row in bad[:MAX_SHOWN]):
            value = o[idx]
            if prim.elementwise:
                ins = []
                for v in values:
                    v = np.asarray(v)
                    ins.append(repr(np.broadcast_to(v, o.shape)[idx].item()))
                lines.append(f"  {label}at index {idx}: {prim.name}({', '.join(ins)}) = {value}")
            else:
                lines.append(f"  {label}at index {idx}: {value}")
        if len(bad) > MAX_SHOWN:
            lines.append(f"  ... {len(bad)} non-finite elements in all (of {o.size})")
    return lines


def _apply(enabled):
    core.set_output_check(check_output if enabled else None)


config.on_update("debug_nans", _apply)
_apply(config.debug_nans)
