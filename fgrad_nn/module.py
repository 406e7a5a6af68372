"""`Module`: a model is the pytree of its parameters.

Every subclass of `Module` becomes a dataclass registered with fgrad.tree:

    class Affine(Module):
        weight: fgrad.Array                 # a child: array leaves (or sub-modules)
        bias: fgrad.Array
        features: int = static_field()      # configuration: part of the tree structure

        def __init__(self, features, *, key):
            self.weight = ...                # fields may be assigned in __init__ only
            ...

        def __call__(self, x, *, key=None):
            return x * self.weight + self.bias

Fields hold arrays, sub-modules, tuples of them, or None; `static_field()` marks
hashable configuration (sizes, flags, activation functions), which jit keys its
cache on. After construction a module is immutable: `replace(module, name=value)`
returns a changed copy. Without a custom `__init__` the dataclass one is used.

Conventions shared by every layer:
- `__call__(x, *, key=None)`; the key is used only by random layers (Dropout).
- Stateful layers (BatchNorm) declare `stateful = True`, give their initial state
  with `init_state()` and are called `layer(x, state, *, key=None) -> (y, new_state)`.
  Containers thread states through their children (see layers.containers).
- Layers whose behaviour differs between training and inference hold a static
  `training` flag; `train_mode(model)` / `eval_mode(model)` return copies with
  the flag set throughout the tree.
"""
import dataclasses

import numpy as np

import fgrad

__all__ = ["Module", "static_field", "field", "replace", "train_mode", "eval_mode",
           "init_state", "is_stateful"]


def field(*, static=False, **kwargs):
    """dataclasses.field, plus `static=True` for configuration stored in the tree
    structure rather than as a leaf."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    if static:
        metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def static_field(**kwargs):
    """A static (configuration) field: hashable, part of the tree structure."""
    return field(static=True, **kwargs)


class _ModuleMeta(type):
    """Runs `__init__` with assignment allowed, then freezes the instance and checks
    that every field was set."""

    def __call__(cls, *args, **kwargs):
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_initialising", True)
        try:
            cls.__init__(obj, *args, **kwargs)
        finally:
            object.__delattr__(obj, "_initialising")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in obj.__dict__]
        if missing:
            raise TypeError(f"{cls.__name__}.__init__ did not set the fields {missing}")
        for f in dataclasses.fields(cls):
            if f.metadata.get("static"):
                _check_hashable(cls, f.name, obj.__dict__[f.name])
        return obj


def _check_hashable(cls, name, value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{cls.__name__}: static field {name!r} must be hashable (jit keys its "
                        f"cache on it), got {type(value).__name__} {value!r}; use a tuple "
                        f"instead of a list") from None


class Module(metaclass=_ModuleMeta):
    """Base class of every layer: an immutable dataclass and a pytree (see above)."""

    stateful = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        custom_init = "__init__" in cls.__dict__ or getattr(cls, "_custom_init", False)
        cls._custom_init = custom_init
        dataclasses.dataclass(cls, init=not custom_init, repr=False, eq=False)
        fgrad.tree.register_dataclass(cls)

    def __setattr__(self, name, value):
        if not self.__dict__.get("_initialising", False):
            raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r} "
                                 f"after construction; use fgrad_nn.replace(module, "
                                 f"{name}=...) to get a changed copy")
        object.__setattr__(self, name, value)

    def init_state(self):
        """The initial state of a stateful layer (None for a stateless one)."""
        return None

    def __repr__(self):
        parts = []
        for f in dataclasses.fields(self):
            parts.append(f"{f.name}={_short(getattr(self, f.name))}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _short(value):
    """Arrays as dtype[shape] (e.g. f32[3,2]); everything else by its repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type):
        dt = np.dtype(value.dtype)
        return f"{dt.kind}{dt.itemsize * 8}[{','.join(map(str, value.shape))}]"
    if isinstance(value, tuple) and value and not isinstance(value[0], (int, float, str)):
        return "(" + ", ".join(_short(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, Module):
        return value.__name__
    return repr(value)


def replace(module, **changes):
    """A copy of `module` with the given fields changed (the constructor is not run)."""
    names = {f.name for f in dataclasses.fields(module)}
    unknown = set(changes) - names
    if unknown:
        raise TypeError(f"replace: {type(module).__name__} has no fields {sorted(unknown)}; "
                        f"its fields are {sorted(names)}")
    new = object.__new__(type(module))
    new.__dict__.update(module.__dict__)
    new.__dict__.update(changes)
    return new


def _is_module(x):
    return isinstance(x, Module)


def is_function(value):
    """Whether `value` is a plain function: callable and a pytree leaf. A model is
    callable too but is a pytree node, so a tree shaped like a model (e.g. a mask
    of bools) counts as data, and a callable pytree is not mistaken for a function."""
    if not callable(value):
        return False
    leaves = fgrad.tree.leaves(value)
    return len(leaves) == 1 and leaves[0] is value


def _set_training(tree, training):
    """Copy of `tree` with every module's `training` flag set, recursively."""
    def visit(node):
        if not isinstance(node, Module):
            return node
        changes = {f.name: _set_training(getattr(node, f.name), training)
                   for f in dataclasses.fields(node) if not f.metadata.get("static")}
        if any(f.name == "training" for f in dataclasses.fields(node)):
            changes["training"] = training
        return replace(node, **changes)
    return fgrad.tree.map(visit, tree, is_leaf=_is_module)


def train_mode(model):
    """A copy of `model` in training mode (batch statistics, active dropout)."""
    return _set_training(model, True)


def eval_mode(model):
    """A copy of `model` in inference mode (running statistics, no dropout)."""
    return _set_training(model, False)


def is_stateful(layer):
    """Whether `layer` is called as layer(x, state) -> (y, new_state)."""
    return isinstance(layer, Module) and layer.stateful


def init_state(model):
    """The initial state of a stateful model (None if it has none)."""
    return model.init_state() if is_stateful(model) else None
