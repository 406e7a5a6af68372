"""fgrad.tree: pytree utilities (map, leaves, structure, flatten, unflatten, register)."""
from fgrad._src.tree_util import (flatten, leaves, map, register_dataclass,  # noqa: F401
                                  register_pytree_node, structure, unflatten)
