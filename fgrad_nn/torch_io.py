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
"""
import dataclasses

import numpy as np

import fgrad.numpy as fnp

from fgrad_nn.module import Module
from fgrad_nn.tree_tools import tree_at

__all__ = ["register_torch_names", "torch_names", "load_torch_state_dict",
           "torch_state_dict"]

_RULES = {}

# PyTorch's BatchNorm buffers: fgrad_nn keeps running statistics in a separate state
_BATCHNORM_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def register_torch_names(cls, rule):
    """Give `cls` (a Module subclass) a naming rule: rule(module) -> {PyTorch name:
    path inside the module} (see the module docstring). Subclasses inherit it."""
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise TypeError(f"register_torch_names: expected a Module subclass, got {cls!r}")
    _RULES[cls] = rule
    return cls


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


def _rule(module):
    for cls in type(module).__mro__:
        if cls in _RULES:
            return _RULES[cls]
    return _default_rule


def _follow(node, path):
    for key in path:
        node = getattr(node, key) if isinstance(node, Module) else node[key]
    return node


def _join(prefix, name):
    return ".".join(p for p in (prefix, name) if p)


def _collect(node, prefix, path, out):
    if node is None:
        return
    if isinstance(node, Module):
        for name, sub in _rule(node)(node).items():
            _collect(_follow(node, sub), _join(prefix, name), path + tuple(sub), out)
    elif isinstance(node, (tuple, list)):
        for i, item in enumerate(node):
            _collect(item, _join(prefix, str(i)), path + (i,), out)
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


def _to_numpy(value):
    if hasattr(value, "detach"):      # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def torch_state_dict(model):
    """The model's parameters as {PyTorch name: NumPy array}, ready for
    torch_module.load_state_dict({k: torch.from_numpy(v) ...})."""
    return {name: np.array(_follow(model, path)) for name, path in torch_names(model).items()}


def load_torch_state_dict(model, state_dict, strict=True):
    """A copy of `model` with its parameters taken from a PyTorch state_dict (a mapping
    of names to arrays, NumPy or anything with .numpy() / __array__).

    strict=True (PyTorch's default) requires the names to match exactly: a clear
    error lists the missing and the unexpected ones; strict=False loads what
    matches and leaves the rest. A shape mismatch is always an error. BatchNorm's
    running statistics are not parameters here (they are the state; see
    BatchNorm): pass strict=False to skip them."""
    names = torch_names(model)
    given = set(state_dict)
    missing = [n for n in names if n not in given]
    unexpected = [n for n in state_dict if n not in names]
    if strict and (missing or unexpected):
        lines = [f"load_torch_state_dict: the state_dict does not match "
                 f"{type(model).__name__}'s parameters"]
        if missing:
            lines.append(f"  missing ({len(missing)}): {', '.join(missing)}")
        if unexpected:
            lines.append(f"  unexpected ({len(unexpected)}): {', '.join(unexpected)}")
        if any(n.rsplit(".", 1)[-1] in _BATCHNORM_BUFFERS for n in unexpected):
            lines.append("  (BatchNorm running statistics live in fgrad_nn's separate state, "
                         "not in the model; pass strict=False to skip them)")
        lines.append("  fgrad_nn.torch_names(model) lists the names the model expects; "
                     "pass strict=False to load only the matching ones")
        raise ValueError("\n".join(lines))
    paths, values, wrong = [], [], []
    for name, path in names.items():
        if name not in given:
            continue
        old = _follow(model, path)
        new = _to_numpy(state_dict[name])
        if new.shape != tuple(old.shape):
            wrong.append(f"{name}: the model has {tuple(old.shape)}, the state_dict "
                         f"{new.shape}")
            continue
        paths.append(path)
        values.append(fnp.asarray(new.astype(np.dtype(old.dtype), copy=False)))
    if wrong:
        raise ValueError("load_torch_state_dict: shape mismatch for " + "; ".join(wrong))
    if not paths:
        return model
    return tree_at(lambda m: [_follow(m, p) for p in paths], model, replace=values)


def _register_builtin_rules():
    from fgrad_nn.layers.containers import Sequential
    from fgrad_nn.layers.recurrent import _Recurrent
    from fgrad_nn.taps import Tapped

    register_torch_names(Sequential, lambda m: {str(i): ("layers", i)
                                                for i in range(len(m.layers))})
    register_torch_names(Tapped, lambda m: {"": ("layer",)})

    def recurrent(m):
        names = {}
        for k in range(len(m.cells)):
            layer, reverse = divmod(k, m.num_directions)
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                names[f"{kind}_l{layer}{'_reverse' if reverse else ''}"] = ("cells", k, kind)
        return names
    register_torch_names(_Recurrent, recurrent)


_register_builtin_rules()
