"""`summary(model, example_input)`: a table of the layers a call goes through, each
with its output shape and parameter count.

The call is traced (fgrad.make_jaxpr on the input's shape and dtype), not run:
every sub-module is wrapped in a recorder that notes the shapes of what it
returns, in call order, so any model made of modules works, not only Sequential.
"""
import numpy as np

import fgrad

from fgrad_nn.module import Module, eval_mode, init_state, is_stateful, static_field
from fgrad_nn.taps import _rebuild
from fgrad_nn.tree_tools import count_params

__all__ = ["summary"]


class _Recorder(Module):
    """`layer`, noting (path, layer, output shapes) in `log` when called."""
    layer: Module
    path: str = static_field()
    log: object = static_field()

    @property
    def stateful(self):
        return is_stateful(self.layer)

    def init_state(self):
        return self.layer.init_state()

    def __getattr__(self, name):   # a parent may read its child's fields
        if name == "layer":
            raise AttributeError(name)
        return getattr(self.layer, name)

    def __call__(self, *args, **kwargs):
        row, depth = len(self.log), self.log.depth
        self.log.append(None)   # the row is placed before those of the calls inside
        self.log.depth += 1
        try:
            out = self.layer(*args, **kwargs)
        finally:
            self.log.depth -= 1
        y = out[0] if self.stateful else out
        self.log[row] = (self.path, depth, self.layer, fgrad.tree.map(_shape_of, y))
        return out


def _shape_of(x):
    return tuple(int(d) for d in np.shape(x))


def _as_spec(x):
    if isinstance(x, fgrad.ShapeDtypeStruct):
        return x
    return fgrad.ShapeDtypeStruct(np.shape(x), fgrad.numpy.result_type(x))


class _Log(list):
    """A list compared by identity, so it can sit in a static field; `depth` counts
    the recorders being called."""
    depth = 1
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other


def _format_shape(shapes):
    if isinstance(shapes, tuple) and all(isinstance(d, int) for d in shapes):
        return "(" + ", ".join(map(str, shapes)) + ("," if len(shapes) == 1 else "") + ")"
    if isinstance(shapes, (tuple, list)):
        return "(" + ", ".join(_format_shape(s) for s in shapes) + ")"
    return str(shapes)


def summary(model, example_input, state=None, print_fn=print):
    """Print (through print_fn) and return a table of every sub-module the call
    model(example_input) reaches, in call order and indented by depth: its path, type,
    output shape and parameter count (floating-point scalars, its sub-modules'
    included), then the model's total. example_input: an array or a
    fgrad.ShapeDtypeStruct (a pytree of them for several inputs); nothing is computed.
    Stateful models are called with `state` (their initial state by default);
    the model is traced in eval mode."""
    log = _Log()
    model = eval_mode(model)

    def visit(node, path):
        return node if not path else _Recorder(layer=node, path=path, log=log)
    wrapped = _rebuild(model, "", visit)
    if is_stateful(model) and state is None:
        state = init_state(model)
    specs = fgrad.tree.map(_as_spec, example_input,
                           is_leaf=lambda x: isinstance(x, fgrad.ShapeDtypeStruct))

    def call(x, s):
        return wrapped(x, s) if is_stateful(model) else wrapped(x)
    out = {}

    def traced(x, s):
        y = call(x, s)
        out["y"] = fgrad.tree.map(_shape_of, y[0] if is_stateful(model) else y)
        return y
    fgrad.make_jaxpr(traced)(specs, state)
    rows = [("(model)", type(model).__name__, _format_shape(out["y"]), count_params(model))]
    for path, depth, layer, shapes in log:
        rows.append(("  " * depth + path, type(layer).__name__, _format_shape(shapes),
                     count_params(layer)))
    header = ("layer", "type", "output shape", "params")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(4)]
    lines = ["  ".join(str(v).ljust(w) if i < 3 else str(v).rjust(w)
                       for i, (v, w) in enumerate(zip(r, widths))).rstrip()
             for r in [header] + rows]
    rule = "-" * len(max(lines, key=len))
    total = count_params(model)
    text = "\n".join([lines[0], rule] + lines[1:] + [rule, f"total parameters: {total:,}"])
    print_fn(text)
    return text

