"""Checkpoints: any pytree of arrays to and from one safetensors file.

    checkpoint.save("run.safetensors", {"params": params, "opt": opt_state},
                    metadata={"epoch": 3})
    state = checkpoint.load("run.safetensors", like={"params": params, "opt": opt_state})

Each leaf is a tensor named by its key path (`layers.0.weight`,
`opt.1.mu.layers.0.bias`); the tree's shape (dicts, lists, tuples, None, named
records) is kept as JSON in the file's `__metadata__`, with a CRC-32 per tensor
so a damaged file is detected. Nothing is pickled or evaluated: the file is
data only, readable by any safetensors reader.

Leaves come back as NumPy arrays (every fgrad function accepts them), with the
exact bits, dtype and shape saved: bool, int8-int64, uint8-uint64, float16,
float32, float64; 0-d and empty arrays included. Python scalars are saved as
0-d arrays.
"""
import json
import os
import tempfile
import zlib

import numpy as np
import optree

import fgrad

__all__ = ["CheckpointError", "save", "load", "load_metadata"]

_FORMAT = "fgrad.checkpoint"
_VERSION = "1"
_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64))
_KEY_TYPES = (str, int, float, bool)
_NAMESPACE = "fgrad"
_CHUNK = 1 << 24


class CheckpointError(ValueError):
    """A checkpoint file is corrupt or truncated, or does not match the expected tree."""


# -- describing a tree ------------------------------------------------------------------

def _entries(spec):
    """The names of a node's children: dict keys, indices, or field names."""
    if spec.kind == optree.PyTreeKind.NAMEDTUPLE:
        return list(spec.type._fields)
    return list(spec.entries())


def _type_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _describe(spec, path, names):
    """JSON-able description of the treespec `spec`; appends leaf names to `names`.

    A leaf is its tensor name (a string), None is null, and a node is
    {"node": kind, "type": class, "keys": child names, "children": [...]}.
    """
    kind = spec.kind
    if kind == optree.PyTreeKind.LEAF:
        names.append(".".join(str(p) for p in path))
        return names[-1]
    if kind == optree.PyTreeKind.NONE:
        return None
    keys = _entries(spec)
    for key in keys:
        if not isinstance(key, _KEY_TYPES):
            raise CheckpointError(f"checkpoint.save: key {key!r} at {'.'.join(map(str, path))!r}"
                                  f" is a {type(key).__name__}; keys must be str, int, float "
                                  f"or bool to be stored as JSON")
    children = [_describe(child, path + (key,), names)
                for key, child in zip(keys, spec.children())]
    if kind in (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT,
                optree.PyTreeKind.DEFAULTDICT):
        node = "dict"
    elif kind in (optree.PyTreeKind.LIST, optree.PyTreeKind.DEQUE):
        node = "list"
    elif kind == optree.PyTreeKind.TUPLE:
        node = "tuple"
    else:   # NamedTuple, struct sequence, registered class: a record of named fields
        node = "record"
    return {"node": node, "type": _type_name(spec.type), "keys": keys, "children": children}


def _flatten(tree):
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=False, namespace=_NAMESPACE)
    names = []
    description = _describe(spec, (), names)
    return leaves, spec, names, description


def _rebuild(description, tensors):
    """Plain containers from a description: dicts, lists, tuples, None; records
    (NamedTuples, registered classes) become dicts of their fields."""
    if description is None:
        return None
    if isinstance(description, str):
        return tensors[description]
    children = [_rebuild(c, tensors) for c in description["children"]]
    node = description["node"]
    if node == "list":
        return children
    if node == "tuple":
        return tuple(children)
    return dict(zip(description["keys"], children))


# -- saving -----------------------------------------------------------------------------

def _as_saveable(name, leaf):
    array = np.asarray(leaf)
    if array.dtype.newbyteorder("=") not in _DTYPES:
        raise CheckpointError(f"checkpoint.save: leaf {name!r} has dtype {array.dtype}, which "
                              f"a checkpoint cannot hold; supported: "
                              f"{sorted(d.name for d in _DTYPES)}")
    # (np.ascontiguousarray would turn a 0-d array into shape (1,))
    return np.require(array.astype(array.dtype.newbyteorder("<"), copy=False), requirements="C")


def _crc(array):
    return zlib.crc32(np.require(array, requirements="C").reshape(-1).view(np.uint8))


def _serialize(tree, metadata):
    import safetensors.numpy

    leaves, _, names, description = _flatten(tree)
    seen = set()
    for name in names:
        if name in seen or name == "__metadata__":
            raise CheckpointError(f"checkpoint.save: two leaves share the name {name!r} (or it "
                                  f"is reserved); rename the dict keys containing '.'")
        seen.add(name)
    tensors = {name: _as_saveable(name, leaf) for name, leaf in zip(names, leaves)}
    header = {"format": _FORMAT, "version": _VERSION,
              "tree": json.dumps(description),
              "crc32": json.dumps({n: _crc(a) for n, a in tensors.items()})}
    if metadata is not None:
        try:
            header["user"] = json.dumps(metadata)
        except TypeError as e:
            raise CheckpointError(f"checkpoint.save: metadata must be JSON-serialisable "
                                  f"(str, numbers, lists, dicts): {e}") from None
    return safetensors.numpy.save(tensors, metadata=header)


def _write(file, data):
    """Write `data` in chunks (a separate step so tests can interrupt it)."""
    view = memoryview(data)
    for start in range(0, len(view), _CHUNK):
        file.write(view[start:start + _CHUNK])


def save(path, tree, metadata=None):
    """Write `tree` (a pytree of arrays) to `path` as a safetensors file, atomically.

    metadata: optional JSON-serialisable dict, read back with `load_metadata`.
    The bytes go to a temporary file in the same directory, which is flushed to
    disk and then renamed over `path`: a crash leaves either the old file or the
    new one, never a mix.
    """
    path = os.fspath(path)
    data = _serialize(tree, metadata)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            _write(file, data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, 0o666 & ~_umask())    # mkstemp makes it private; a file is not
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _umask():
    """The process's umask, read without changing it where the OS allows (setting it
    to read it would race with other threads creating files)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory):
    """Make the rename durable (not possible on every platform)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- loading ----------------------------------------------------------------------------

def _read_header(path, data):
    """The file's `__metadata__` (our format fields), checking the framing first."""
    if len(data) < 8:
        raise CheckpointError(f"{path}: truncated checkpoint: {len(data)} bytes, shorter than "
                              f"the 8-byte safetensors header length")
    size = int.from_bytes(data[:8], "little")
    if 8 + size > len(data):
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint: the header claims "
                              f"{size} bytes but the file has {len(data)} in all")
    try:
        header = json.loads(data[8:8 + size])
        meta = header["__metadata__"]
        if meta.get("format") != _FORMAT:
            raise KeyError("format")
        return meta
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CheckpointError(f"{path}: not an fgrad checkpoint: the safetensors header is not "
                              f"valid JSON or lacks the {_FORMAT!r} metadata") from None


def _read(path):
    import safetensors.numpy

    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    meta = _read_header(path, data)
    if meta.get("version") != _VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {meta.get('version')!r}; "
                              f"this fgrad reads version {_VERSION}")
    try:
        tensors = safetensors.numpy.load(data)
        description = json.loads(meta["tree"])
        crcs = json.loads(meta["crc32"])
        names = []
        _collect_names(description, names)
    except Exception as e:   # safetensors raises its own SafetensorError
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint: {e}") from None
    if set(names) != set(tensors) or set(crcs) != set(tensors):
        unknown = sorted((set(names) | set(crcs)) ^ set(tensors))
        raise CheckpointError(f"{path}: corrupt checkpoint: the metadata and the tensors "
                              f"disagree about {unknown[:5]}")
    for name, array in tensors.items():
        if crcs.get(name) != _crc(array):
            raise CheckpointError(f"{path}: corrupt checkpoint: tensor {name!r} fails its "
                                  f"CRC-32 check (the data bytes were changed)")
    tensors = {n: a.astype(a.dtype.newbyteorder("="), copy=True) for n, a in tensors.items()}
    return path, names, description, tensors


def _signature(array):
    return f"{np.dtype(array.dtype).name}{list(array.shape)}"


def _check_against(path, names, tensors, like_names, like_leaves):
    """Raise CheckpointError at the first leaf where file and template differ."""
    for i, (name, like_name) in enumerate(zip(names, like_names)):
        if name != like_name:
            raise CheckpointError(f"{path}: checkpoint does not match the template: leaf #{i} "
                                  f"is {name!r} in the file but {like_name!r} in the template")
    if len(names) != len(like_names):
        common = min(len(names), len(like_names))
        which, longer = ("file", names) if len(names) > common else ("template", like_names)
        raise CheckpointError(f"{path}: checkpoint does not match the template: the file has "
                              f"{len(names)} leaves, the template {len(like_names)}; the first "
                              f"one only in the {which} is {longer[common]!r}")
    for name, like_leaf in zip(names, like_leaves):
        stored = tensors[name]
        like_leaf = like_leaf if hasattr(like_leaf, "shape") and hasattr(like_leaf, "dtype") \
            else np.asarray(like_leaf)
        if tuple(like_leaf.shape) != stored.shape or np.dtype(like_leaf.dtype) != stored.dtype:
            raise CheckpointError(f"{path}: checkpoint does not match the template at "
                                  f"{name!r}: the file has {_signature(stored)}, the template "
                                  f"{_signature(like_leaf)}")


def load(path, like=None):
    """Read a checkpoint written by `save`.

    like: a template tree (e.g. freshly initialised parameters and optimizer
    state; leaves may be arrays or fgrad.ShapeDtypeStruct). The file must hold
    the same leaf paths, shapes and dtypes, in the same order; the result is
    built with the template's containers, so NamedTuples, modules and other
    registered classes come back as themselves. Without `like`, the result is
    made of plain dicts, lists, tuples and None, with NamedTuples and registered
    classes as dicts of their fields.

    Raises CheckpointError for a corrupt or truncated file or a template
    mismatch (naming the first differing path), FileNotFoundError if `path`
    does not exist.
    """
    path, names, description, tensors = _read(path)
    if like is None:
        return _rebuild(description, tensors)
    like_leaves, like_spec, like_names, _ = _flatten(like)
    _check_against(path, names, tensors, like_names, like_leaves)
    return fgrad.tree.unflatten(like_spec, [tensors[n] for n in names])


def _collect_names(description, names):
    if isinstance(description, str):
        names.append(description)
    elif isinstance(description, dict):
        for child in description["children"]:
            _collect_names(child, names)


def load_metadata(path):
    """The `metadata` dict given to `save` (None if there was none)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read(8)
        if len(data) == 8:   # never more than the file holds, whatever the length says
            data += f.read(min(int.from_bytes(data, "little"), os.fstat(f.fileno()).st_size))
    user = _read_header(path, data).get("user")
    return None if user is None else json.loads(user)
