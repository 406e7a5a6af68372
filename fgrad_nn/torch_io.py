"""Pretrained weights both ways between fgrad_nn models and PyTorch `state_dict`s,
by PyTorch's parameter names ("0.weight", "encoder.weight_ih_l0_reverse"); torch is
never imported.

A module's PyTorch names come from its class's naming rule. The default rule
names each array field by its field name ("weight", "bias"), each sub-module by its
field name as a prefix ("out_proj.weight"), and the items of a tuple field by
"field.index"; None fields (no bias) have no entry. Layers whose PyTorch names
differ register their own rule:

    register_torch_names(Sequential, lambda m: {str(i): ("layers", i)
                                                for i in range(len(m.layers))})

The rule maps each PyTorch name (relative to the module) to a path of field names
and indices inside the module; what the path reaches is an array (a parameter), a
module (named recursively under that prefix; "" adds no prefix), or None (skipped).
Parameters must have PyTorch's layout; values are cast to the model's dtypes.

Buffers (BatchNorm's running statistics) are in fgrad_nn's separate state: pass
`state=` to both functions to move them too. A stateful layer names its buffers
with `register_torch_buffers`, and a container holding stateful layers says where
each child's state sits in its own with `register_torch_state_route`.
"""
import dataclasses

import numpy as np

import fgrad.numpy as fnp

from fgrad_nn.module import Module, is_stateful
from fgrad_nn.tree_tools import tree_at

__all__ = ["register_torch_names", "register_torch_buffers", "register_torch_state_route",
           "torch_names", "torch_buffer_names", "load_torch_state_dict", "torch_state_dict"]

_RULES = {}
_BUFFER_RULES = {}
_STATE_ROUTES = {}
_NO_STATE = object()

# PyTorch's BatchNorm buffers: fgrad_nn keeps running statistics in a separate state
_BATCHNORM_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def register_torch_names(cls, rule):
    """Give `cls` (a Module subclass) a naming rule: rule(module) -> {PyTorch name:
    path inside the module} (see the module docstring). Subclasses inherit it."""
    _check_module_class("register_torch_names", cls)
    _RULES[cls] = rule
    return cls


def register_torch_buffers(cls, rule):
    """Name the buffers of a stateful layer (PyTorch's running statistics, kept in
    fgrad_nn's separate state): rule(layer) -> {PyTorch name: path inside the layer's
    state}; a path reaching None is a buffer PyTorch has and this layer does not
    keep (skipped on loading, not written)."""
    _check_module_class("register_torch_buffers", cls)
    _BUFFER_RULES[cls] = rule
    return cls


def register_torch_state_route(cls, route):
    """Tell how a stateful container's state reaches its children:
    route(container, path) -> the path inside the container's state to the state of
    the child at `path` (a path its naming rule gives)."""
    _check_module_class("register_torch_state_route", cls)
    _STATE_ROUTES[cls] = route
    return cls


def _check_module_class(where, cls):
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise TypeError(f"{where}: expected a Module subclass, got {cls!r}")


def _default_rule(module):
    names = {}
    for f in dataclasses.fields(module):
        if f.metadata.get("static"):
            continue
        value = getattr(module, f.name)
        if isinstance(value, (tuple, list)):
            names.update({f"{f.name}.{i}": (f.name, i) for i in range(len(value))})
        elif isinstance(value, dict):
            names.update({f"{f.name}.{k}": (f.name, k) for k in value})
        else:
            names[f.name] = (f.name,)
    return names


def _lookup(table, module, default=None):
    for cls in type(module).__mro__:
        if cls in table:
            return table[cls]
    return default


def _rule(module):
    return _lookup(_RULES, module, _default_rule)


def _follow(node, path):
    for key in path:
        node = getattr(node, key) if isinstance(node, Module) else node[key]
    return node


def _join(prefix, name):
    return ".".join(p for p in (prefix, name) if p)


def _collect(node, prefix, path, out, state=_NO_STATE, state_path=(), buffers=None):
    """Fill out[name] = path to each parameter; with a state, also buffers[name] =
    path in the state to each buffer (None for buffers this layer does not keep)."""
    if node is None:
        return
    if isinstance(node, Module):
        stateful = state is not _NO_STATE and is_stateful(node)
        buffer_rule = _lookup(_BUFFER_RULES, node)
        if stateful and buffer_rule is not None:
            for name, sub in buffer_rule(node).items():
                held = _follow(state, sub) is not None
                buffers[_join(prefix, name)] = state_path + tuple(sub) if held else None
        for name, sub in _rule(node)(node).items():
            child = _follow(node, sub)
            child_state, child_path = _NO_STATE, ()
            if stateful and is_stateful(child):
                route = _lookup(_STATE_ROUTES, node)
                if route is None:
                    raise TypeError(f"torch_names: {type(node).__name__} holds a stateful "
                                    f"layer but has no state route; register one with "
                                    f"register_torch_state_route")
                child_path = tuple(route(node, tuple(sub)))
                child_state = _follow(state, child_path)
            _collect(child, _join(prefix, name), path + tuple(sub), out, child_state,
                     state_path + child_path, buffers)
    elif isinstance(node, (tuple, list)):
        for i, item in enumerate(node):
            _collect(item, _join(prefix, str(i)), path + (i,), out, state, state_path, buffers)
    elif hasattr(node, "shape") and hasattr(node, "dtype"):
        if prefix in out:
            raise ValueError(f"torch_names: two parameters are both named {prefix!r}; fix the "
                             f"naming rule of the layer holding them")
        out[prefix] = path
    else:
        raise TypeError(f"torch_names: {prefix or 'the model'} is a "
                        f"{type(node).__name__}, neither an array nor a module")


def torch_names(model):
    """{PyTorch name: path of field names and indices to the array in `model`}, in
    the model's order."""
    out = {}
    _collect(model, "", (), out)
    return out


def torch_buffer_names(model, state):
    """{PyTorch name: path to the buffer in `state`} for the model's stateful layers
    (BatchNorm's running_mean, running_var, num_batches_tracked)."""
    out, buffers = {}, {}
    _collect(model, "", (), out, state, (), buffers)
    return {name: p for name, p in buffers.items() if p is not None}


def _to_numpy(value):
    if hasattr(value, "detach"):      # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def torch_state_dict(model, state=None):
    """The model's parameters (and, given its state, its buffers such as BatchNorm's
    running statistics) as {PyTorch name: NumPy array}, ready for
    torch_module.load_state_dict({k: torch.from_numpy(v) ...})."""
    out = {name: np.array(_follow(model, path)) for name, path in torch_names(model).items()}
    if state is not None:
        out.update({name: np.array(_follow(state, path))
                    for name, path in torch_buffer_names(model, state).items()})
    return out


def _load(tree, names, state_dict, wrong):
    paths, values = [], []
    for name, path in names.items():
        if name not in state_dict:
            continue
        old = _follow(tree, path)
        new = _to_numpy(state_dict[name])
        if new.shape != tuple(old.shape):
            wrong.append(f"{name}: the model has {tuple(old.shape)}, the state_dict "
                         f"{new.shape}")
            continue
        paths.append(path)
        values.append(fnp.asarray(new.astype(np.dtype(old.dtype), copy=False)))
    if not paths or wrong:
        return tree
    return tree_at(lambda t: [_follow(t, p) for p in paths], tree, replace=values)


def load_torch_state_dict(model, state_dict, strict=True, state=None):
    """A copy of `model` with its parameters taken from a PyTorch state_dict (a mapping
    of names to arrays, NumPy or anything with .numpy() / __array__).

    strict=True (PyTorch's default) requires the names to match exactly: a clear
    error lists the missing and the unexpected ones; strict=False loads what
    matches and leaves the rest. A shape mismatch is always an error.
    Buffers (BatchNorm's running statistics) live in fgrad_nn's separate state:
    pass it (state=fgrad_nn.init_state(model)) to load them too, and get
    (model, state) back; a buffer PyTorch has and the layer does not keep
    (num_batches_tracked unless momentum=None) is skipped."""
    names = torch_names(model)
    known = dict(names)
    buffers = {}
    if state is not None:
        _collect(model, "", (), {}, state, (), buffers)
        known.update(buffers)
    missing = [n for n in known if n not in state_dict and known[n] is not None]
    unexpected = [n for n in state_dict if n not in known]
    if strict and (missing or unexpected):
        lines = [f"load_torch_state_dict: the state_dict does not match "
                 f"{type(model).__name__}'s parameters"]
        if missing:
            lines.append(f"  missing ({len(missing)}): {', '.join(missing)}")
        if unexpected:
            lines.append(f"  unexpected ({len(unexpected)}): {', '.join(unexpected)}")
        if state is None and any(n.rsplit(".", 1)[-1] in _BATCHNORM_BUFFERS for n in unexpected):
            lines.append("  (BatchNorm running statistics live in fgrad_nn's separate state, "
                         "not in the model: pass state=fgrad_nn.init_state(model) to load "
                         "them, or strict=False to skip them)")
        lines.append("  fgrad_nn.torch_names(model) lists the names the model expects; "
                     "pass strict=False to load only the matching ones")
        raise ValueError("\n".join(lines))
    wrong = []
    model = _load(model, names, state_dict, wrong)
    if state is not None:
        state = _load(state, {n: p for n, p in buffers.items() if p is not None}, state_dict,
                      wrong)
    if wrong:
        raise ValueError("load_torch_state_dict: shape mismatch for " + "; ".join(wrong))
    return model if state is None else (model, state)


def _register_builtin_rules():
    from fgrad_nn.layers.containers import Residual, Sequential
    from fgrad_nn.layers.norm import BatchNorm, _InstanceNorm
    from fgrad_nn.layers.recurrent import _Recurrent
    from fgrad_nn.taps import Tapped

    register_torch_names(Sequential, lambda m: {str(i): ("layers", i)
                                                for i in range(len(m.layers))})
    register_torch_state_route(Sequential, lambda m, path: (path[1],))
    register_torch_names(Tapped, lambda m: {"": ("layer",)})
    register_torch_state_route(Tapped, lambda m, path: ())
    register_torch_state_route(Residual, lambda m, path: ())
    register_torch_buffers(BatchNorm, lambda m: {name: (i,) for i, name
                                                 in enumerate(_BATCHNORM_BUFFERS)})
    # InstanceNorm(track_running_stats=True) keeps a BatchNormState (no count)
    register_torch_buffers(_InstanceNorm, lambda m: {name: (i,) for i, name
                                                     in enumerate(_BATCHNORM_BUFFERS)})

    def recurrent(m):
        names = {}
        for k in range(len(m.cells)):
            layer, reverse = divmod(k, m.num_directions)
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                names[f"{kind}_l{layer}{'_reverse' if reverse else ''}"] = ("cells", k, kind)
        return names
    register_torch_names(_Recurrent, recurrent)


_register_builtin_rules()
