"""Bounded in-memory caches: beyond `config.jit_cache_size` entries, the least
recently used one is dropped (and made again if it is needed again)."""
from collections import OrderedDict

from .config import config


class LRU:
    """A mapping of at most `config.jit_cache_size` entries (read at each insert, so
    a new setting applies from the next one). A hit makes its entry the newest."""
    __slots__ = ("_data",)

    def __init__(self):
        self._data = OrderedDict()

    def get(self, key, default=None):
        value = self._data.get(key, _ABSENT)
        if value is _ABSENT:
            return default
        try:
            self._data.move_to_end(key)
        except KeyError:         # another thread dropped it meanwhile
            pass
        return value

    def __setitem__(self, key, value):
        data = self._data
        data[key] = value
        data.move_to_end(key)
        while len(data) > config.jit_cache_size:
            data.popitem(last=False)

    def __len__(self):
        return len(self._data)

    def clear(self):
        self._data.clear()


_ABSENT = object()


def memo(table, key, make):
    """table[key], made by make() on a miss."""
    value = table.get(key, _ABSENT)
    if value is _ABSENT:
        value = make()
        table[key] = value
    return value


def derived(closed, key, make):
    """make() once per (closed jaxpr object, key). The values live on the jaxpr in
    an LRU table, so they die with it, even those that refer back to it."""
    table = closed._derived
    if table is None:
        table = closed._derived = LRU()
    return memo(table, key, make)
