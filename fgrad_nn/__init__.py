"""fgrad_nn: neural-network building blocks on top of fgrad's public API.

A model is a pytree of its parameters (`Module`), so fgrad.grad, jit and vmap
apply to it directly; optimizers are stateless (init, update) pairs; nothing is
mutated in place.
"""
from fgrad_nn.module import (Module, eval_mode, field, init_state, is_stateful,  # noqa: F401
                             replace, static_field, train_mode)
from fgrad_nn import (checkpoint, data, functional, init, layers, losses, optim,  # noqa: F401,E402
                      schedules, training)
from fgrad_nn.layers import *  # noqa: F401,F403,E402
from fgrad_nn.taps import Tapped, tap, untap  # noqa: F401,E402
from fgrad_nn.tree_tools import (combine, count_params, filter, is_array,  # noqa: F401,E402,A001
                                 is_inexact_array, partition, tree_at)
from fgrad_nn.summary import summary  # noqa: F401,E402
from fgrad_nn.torch_io import (load_torch_state_dict, register_torch_buffers,  # noqa: F401,E402
                               register_torch_names, register_torch_state_route,
                               torch_buffer_names, torch_names, torch_state_dict)
