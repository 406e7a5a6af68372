"""The flat environment a compiled program runs in, shared by the CPU and GPU
executables.

Every variable of a closed jaxpr gets a position in a list; the program's
constants and Literals are placed in a template once, when the program is
built, so a call copies the template, drops the inputs in and runs its steps.
"""
from ..jaxpr import Literal


class Slots:
    """Positions of a closed jaxpr's variables in a flat environment.

    `template` holds the constants (converted by `raw`) and Literal values and
    None elsewhere; `inputs` are the positions of the jaxpr's inputs."""

    def __init__(self, closed, raw):
        self._raw = raw
        self._index = {}
        self.template = []
        for v, c in zip(closed.jaxpr.constvars, closed.consts):
            self.template[self.of(v)] = raw(c)
        self.inputs = [self.of(v) for v in closed.jaxpr.invars]

    def of(self, v):
        """The position of variable v (allocated on first use)."""
        if v not in self._index:
            self._index[v] = len(self.template)
            self.template.append(None)
        return self._index[v]

    def ref(self, a):
        """The position of an atom: a variable's, or a new one holding a Literal's value."""
        if type(a) is Literal:
            self.template.append(self._raw(a.val))
            return len(self.template) - 1
        return self.of(a)


def run_steps(steps, env):
    """Run each step (fn, ins, outs, params, multiple) on the environment list."""
    for s in steps:
        result = s.fn(*[env[i] for i in s.ins], **s.params)
        if s.multiple:
            for i, r in zip(s.outs, result):
                env[i] = r
        else:
            env[s.outs[0]] = result
    return env


def step_summary(steps):
    """'3 native, 1 numpy': how many steps of each kind (the label before ':')."""
    counts = {}
    for s in steps:
        kind = s.label.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no"
