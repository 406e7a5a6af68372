"""fgrad.tree: pytree utilities (map, leaves, structure, flatten, unflatten, register;
paths: flatten_with_path, leaves_with_path, map_with_path, keystr)."""
from fgrad._src.tree_util import (flatten, leaves, map, register_dataclass,  # noqa: F401
                                  register_pytree_node, structure, unflatten)
from fgrad._src.tree_paths import (flatten_with_path, keystr, leaves_with_path,  # noqa: F401,E402
                                   map_with_path)
