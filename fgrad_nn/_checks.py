"""Argument checks shared by the layers and optimizers."""
import numpy as np


def flag(where, name, value):
    """`value` as a bool, refusing anything but True/False (a string such as
    'False' is truthy, and would silently mean the opposite)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{where}: {name} must be True or False, got {value!r}")
