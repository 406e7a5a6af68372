"""Forward and backward taps on layers: hooks without mutation.

PyTorch registers hooks on a module object; here a model is a value, so
`tap(model, where, on_forward=..., on_backward=...)` returns a copy in which
every sub-module selected by `where(path, module)` is wrapped in a `Tapped`
layer. The wrapper calls the layer unchanged, then

- `on_forward(path, inputs, output)` with concrete values (through
  fgrad.debug.callback, so also inside jit, once per example under vmap, and in
  the forward pass only under grad);
- `on_backward(path, cotangent)` when reverse mode reaches the layer's output
  (through fgrad.debug.tap_grad, also inside jit).

The parameters are the same arrays, so `untap(tapped)` gives back a model equal
to the original. `path` names the layer like a checkpoint does ("layers.1").
"""
import dataclasses

import fgrad

from fgrad_nn.module import Module, is_stateful, replace, static_field

__all__ = ["Tapped", "tap", "untap"]


class Tapped(Module):
    """`layer` with taps (see the module docstring); called like `layer`."""
    layer: Module
    path: str = static_field()
    on_forward: object = static_field(default=None)
    on_backward: object = static_field(default=None)

    @property
    def stateful(self):
        return is_stateful(self.layer)

    def init_state(self):
        return self.layer.init_state()

    def __call__(self, x, *args, **kwargs):
        out = self.layer(x, *args, **kwargs)
        y = out[0] if self.stateful else out
        if self.on_forward is not None:
            observe, path = self.on_forward, self.path
            fgrad.debug.callback(lambda x, y: observe(path, x, y), x, y)
        if self.on_backward is not None:
            observe_grad, path = self.on_backward, self.path
            y = fgrad.debug.tap_grad(y, lambda ct: observe_grad(path, ct))
        return (y,) + tuple(out[1:]) if self.stateful else y


def _children(node):
    return [f.name for f in dataclasses.fields(node) if not f.metadata.get("static")]


def _rebuild(node, path, visit):
    """`node` with `visit(child, child_path)` applied to every child module."""
    if isinstance(node, Module):
        def child_path(name):   # a tap is transparent: its layer keeps the tap's path
            return path if isinstance(node, Tapped) else f"{path}.{name}" if path else name
        changes = {name: _rebuild(getattr(node, name), child_path(name), visit)
                   for name in _children(node)}
        return visit(replace(node, **changes), path)
    if isinstance(node, (tuple, list)):
        return type(node)(_rebuild(v, f"{path}.{i}" if path else str(i), visit)
                          for i, v in enumerate(node))
    return node


def tap(model, where, on_forward=None, on_backward=None):
    """A copy of `model` whose sub-modules with `where(path, module)` true (the model
    itself has path "") are wrapped in `Tapped` with these callbacks."""
    if on_forward is None and on_backward is None:
        raise ValueError("tap: give on_forward(path, inputs, output) and/or "
                         "on_backward(path, cotangent)")

    def visit(node, path):
        if isinstance(node, Tapped) or not where(path, node):
            return node
        return Tapped(layer=node, path=path, on_forward=on_forward, on_backward=on_backward)
    return _rebuild(model, "", visit)


def untap(model):
    """`model` without any taps."""
    def visit(node, path):
        return node.layer if isinstance(node, Tapped) else node
    return _rebuild(model, "", visit)
