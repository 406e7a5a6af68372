"""Cache keys for Python values that are baked into programs.

Python's `==` says 1 == 1.0 == True, 0.0 == -0.0 and (1, 2.0) == (1.0, 2), and
NaN equals nothing, not even itself. A cache keyed on such values directly
hands a program traced for `True` to a call with `1.0`, one traced for `0.0`
to a call with `-0.0`, and traces NaN afresh each time. `value_key` turns a
hashable value into a key that is equal only for values of the same type and
the same bits (every NaN of a type alike), looking inside tuples (NamedTuples
too) and frozensets; other objects keep their own `__eq__` and `__hash__`.
"""
import numpy as np


_EXACT = frozenset({int, str, type(None)})


def value_key(v):
    """A hashable key telling apart values that `==` confuses (see the module
    docstring); raises TypeError for an unhashable value, as hash() does."""
    t = type(v)
    if t is int or t is str or t is bool or v is None:
        return (t, v)
    if t is float:
        return (t, v.hex())            # '-0x0.0p+0' vs '0x0.0p+0'; every NaN is 'nan'
    if t is complex:
        return (t, v.real.hex(), v.imag.hex())
    if isinstance(v, tuple):
        if all(type(x) in _EXACT for x in v):
            return (t, v)          # ints, strings, None: `==` already tells them apart
        return (t, tuple(value_key(x) for x in v))
    if t is frozenset:
        return (t, frozenset(value_key(x) for x in v))
    if isinstance(v, np.generic):
        if isinstance(v, np.inexact) and np.isnan(v):
            return (t, "nan")
        return (t, v.tobytes())
    hash(v)
    return (t, v)


class StaticValue:
    """A static argument in a cache key: compared and hashed by `value_key`,
    shown as the value itself (in cache-miss explanations)."""
    __slots__ = ("value", "key", "_hash")

    def __init__(self, value):
        self.value = value
        self.key = value_key(value)
        self._hash = hash(self.key)

    def __eq__(self, other):
        return type(other) is StaticValue and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return repr(self.value)
