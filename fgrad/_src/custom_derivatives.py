"""custom_jvp and custom_vjp: functions with user-supplied derivative rules.

Each call binds a call-primitive holding the function and its rule. Eagerly it
just runs the function; a JVP trace runs the custom JVP rule; a linearize trace
runs `fwd` now and leaves a linear `custom_lin` equation whose transpose calls
`bwd`; a jaxpr trace records the call with the traced function as a sub-jaxpr.
"""
import functools
import inspect

import numpy as np

from . import tree_util
from .core import Array, Primitive, Tracer, current_trace, full_lower, get_aval
from .jaxpr import eval_jaxpr


class _CustomCallPrimitive(Primitive):
    def __init__(self, name, kind):
        super().__init__(name, multiple_results=True)
        self.kind = kind  # "jvp" or "vjp"
        self.abstract_eval = lambda *avals, call_jaxpr, **params: call_jaxpr.out_avals

    def bind(self, *args, call_jaxpr, num_consts, **params):
        """Re-bind a recorded call (from eval_jaxpr)."""
        consts, args = args[:num_consts], args[num_consts:]
        rules = params.pop("jvp") if self.kind == "jvp" else (params.pop("fwd"), params.pop("bwd"))

        def fun(*a):
            return eval_jaxpr(call_jaxpr.jaxpr, consts, *a)
        return self.bind_with(fun, rules, args, params)

    def bind_with(self, fun, rules, args, params):
        trace = current_trace()
        if self.kind == "jvp":
            return trace.process_custom_jvp_call(self, fun, rules, args, params)
        fwd, bwd = rules
        return trace.process_custom_vjp_call(self, fun, fwd, bwd, args, params)


custom_jvp_call_p = _CustomCallPrimitive("custom_jvp_call", "jvp")
custom_vjp_call_p = _CustomCallPrimitive("custom_vjp_call", "vjp")


class _Box:
    """Holds a tree structure learned while a wrapped function runs."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = None

    def set(self, value, what):
        if self.value is not None and self.value != value:
            raise TypeError(f"{what} returned a different tree structure ({value}) than the "
                            f"function itself ({self.value})")
        self.value = value


def _is_array_like(x):
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic, bool, int, float))


def _positional(fun, args, kwargs):
    if not kwargs:
        return args
    return inspect.signature(fun).bind(*args, **kwargs).args


class _CustomFunction:
    def __init__(self, fun, nondiff_argnums):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)

    def _split(self, args):
        nondiff = [args[i] for i in self.nondiff_argnums]
        diff = [a for i, a in enumerate(args) if i not in self.nondiff_argnums]
        flat, in_tree = tree_util.flatten(diff)
        return nondiff, flat, in_tree

    def _merge(self, nondiff, diff):
        args, nd, d = [], iter(nondiff), iter(diff)
        for i in range(len(self.nondiff_argnums) + len(diff)):
            args.append(next(nd) if i in self.nondiff_argnums else next(d))
        return args

    def _flat_fun(self, nondiff, in_tree, out_tree):
        def flat_fun(*flat_args):
            out = self.fun(*self._merge(nondiff, tree_util.unflatten(in_tree, flat_args)))
            leaves, tree = tree_util.flatten(out)
            out_tree.set(tree, self.__name__)
            return [full_lower(x) for x in leaves]
        return flat_fun


class custom_jvp(_CustomFunction):
    """A function with a custom forward-mode rule (reverse mode follows by transposition).

        @custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): ... return out, tangent_out

    With nondiff_argnums, those arguments come first in the rule:
    rule(*nondiff_args, primals, tangents).
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"no JVP rule defined for the custom_jvp function "
                                 f"{self.__name__}; define one with @{self.__name__}.defjvp")
        args = _positional(self.fun, args, kwargs)
        nondiff, flat, in_tree = self._split(args)
        flat = [full_lower(x) for x in flat]
        out_tree = _Box()

        def flat_jvp(primals, tangents):
            p = tree_util.unflatten(in_tree, primals)
            t = tree_util.unflatten(in_tree, tangents)
            result = self.jvp(*nondiff, tuple(p), tuple(t))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"the JVP rule of {self.__name__} must return a pair "
                                f"(primal_out, tangent_out)")
            out, tout = result
            out_leaves, tree = tree_util.flatten(out)
            t_leaves, t_tree = tree_util.flatten(tout)
            out_tree.set(tree, f"the JVP rule of {self.__name__}")
            if t_tree != tree:
                raise TypeError(f"the JVP rule of {self.__name__} returned tangents with "
                                f"structure {t_tree}, but primal outputs with {tree}")
            for o, t in zip(out_leaves, t_leaves):
                oa, ta = get_aval(o), get_aval(t)
                if oa.shape != ta.shape or (oa.dtype != ta.dtype and not ta.weak_type):
                    raise TypeError(
                        f"the JVP rule of {self.__name__} returned a tangent "
                        f"{ta.str_short()} for a primal output {oa.str_short()}; they must "
                        f"have the same shape and dtype")
            return [full_lower(x) for x in out_leaves], [full_lower(x) for x in t_leaves]

        outs = custom_jvp_call_p.bind_with(self._flat_fun(nondiff, in_tree, out_tree),
                                           flat_jvp, flat, {"name": self.__name__})
        return tree_util.unflatten(out_tree.value, outs)


class custom_vjp(_CustomFunction):
    """A function with a custom reverse-mode rule.

        @custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals
        def f_bwd(residuals, g): return (cotangent_for_x,)
        f.defvjp(f_fwd, f_bwd)

    bwd returns a tuple with one cotangent per (non-static) argument; None means zero.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"no VJP rule defined for the custom_vjp function "
                                 f"{self.__name__}; define one with {self.__name__}.defvjp")
        args = _positional(self.fun, args, kwargs)
        nondiff, flat, in_tree = self._split(args)
        flat = [full_lower(x) for x in flat]
        out_tree, res_tree = _Box(), _Box()
        n_diff = len(args) - len(self.nondiff_argnums)

        def flat_fwd(*primals):
            result = self.fwd(*self._merge(nondiff, tree_util.unflatten(in_tree, primals)))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"the fwd rule of {self.__name__} must return a pair "
                                f"(output, residuals)")
            out, res = result
            out_leaves, tree = tree_util.flatten(out)
            out_tree.set(tree, f"the fwd rule of {self.__name__}")
            res_leaves, rtree = tree_util.flatten(res)
            # Arrays travel as residual operands; other leaves (strings, shapes, ...) stay here.
            is_array = [_is_array_like(x) for x in res_leaves]
            res_tree.value = (rtree, is_array, [x for x, a in zip(res_leaves, is_array) if not a])
            return ([full_lower(x) for x in out_leaves],
                    [full_lower(x) for x, a in zip(res_leaves, is_array) if a])

        def flat_bwd(res, cts):
            rtree, is_array, static = res_tree.value
            res, static = iter(res), iter(static)
            res = tree_util.unflatten(rtree, [next(res) if a else next(static) for a in is_array])
            ct = tree_util.unflatten(out_tree.value, cts)
            cts_in = self.bwd(*nondiff, res, ct)
            if not isinstance(cts_in, (tuple, list)) or len(cts_in) != n_diff:
                raise TypeError(
                    f"the bwd rule of {self.__name__} must return a tuple with one "
                    f"cotangent per differentiable argument ({n_diff}), got {cts_in!r}")
            args_tree = tree_util.unflatten(in_tree, [0] * in_tree.num_leaves)
            flat_cts = []
            for arg, c in zip(args_tree, cts_in):
                n = tree_util.structure(arg).num_leaves
                if c is None:
                    flat_cts.extend([None] * n)
                    continue
                leaves = tree_util.structure(arg).flatten_up_to(c)
                flat_cts.extend(None if x is None else full_lower(x) for x in leaves)
            return flat_cts

        outs = custom_vjp_call_p.bind_with(self._flat_fun(nondiff, in_tree, out_tree),
                                           (flat_fwd, flat_bwd), flat, {"name": self.__name__})
        return tree_util.unflatten(out_tree.value, outs)
