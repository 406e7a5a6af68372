"""Checkpoints: any pytree of arrays to and from one safetensors file.

    checkpoint.save("run.safetensors", {"params": params, "opt": opt_state},
                    metadata={"epoch": 3})
    state = checkpoint.load("run.safetensors", like={"params": params, "opt": opt_state})

Each leaf is a tensor named by its key path (`layers.0.weight`,
`opt.1.mu.layers.0.bias`); the tree's shape (dicts, lists, tuples, None, named
records) is kept as JSON in the file's `__metadata__`, with a CRC-32 per tensor
and one over the header (the tree, the tensors' names, dtypes and shapes, and
the user metadata), so a damaged file is detected: every malformed file raises
CheckpointError, and no damage to the header loads a silently changed tree.
Nothing is pickled or evaluated: the file is data only, readable by any
safetensors reader. Files of format version 1 (before the header checksum)
still load.

Leaves come back as NumPy arrays (every fgrad function accepts them), with the
exact bits, dtype and shape saved: bool, int8-int64, uint8-uint64, float16,
float32, float64, complex64, complex128; 0-d and empty arrays included. Python
scalars are saved as 0-d arrays. safetensors has no complex dtype: a complex
leaf is stored as its real view (F32 or F64, with a trailing axis of 2 holding
the real and imaginary parts), and the header's `complex` field lists those
tensors (such files are format version 3, which older readers refuse rather than
load the real views as they are).
"""
import json
import os
import zlib

import numpy as np
import optree

import fgrad
from fgrad_nn._atomic import write_atomically

__all__ = ["CheckpointError", "save", "load", "load_metadata"]

_FORMAT = "fgrad.checkpoint"
_VERSION = "2"
_COMPLEX_VERSION = "3"            # version 2 plus complex leaves stored as real views
_READABLE_VERSIONS = ("1", "2", "3")   # version 1 files have no header checksum
_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128))
_COMPLEX_PARTS = {np.dtype(np.complex64): np.dtype("<f4"), np.dtype(np.complex128): np.dtype("<f8")}
_KEY_TYPES = (str, int, float, bool)
_NAMESPACE = "fgrad"
_CHUNK = 1 << 24
_NODES = ("dict", "list", "tuple", "record")
# safetensors' names of the dtypes, as they appear in the file's header
_SAFETENSORS_DTYPES = {
    np.dtype(np.bool_): "BOOL", np.dtype(np.int8): "I8", np.dtype(np.int16): "I16",
    np.dtype(np.int32): "I32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8",
    np.dtype(np.uint16): "U16", np.dtype(np.uint32): "U32", np.dtype(np.uint64): "U64",
    np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}


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
    array = np.require(array.astype(array.dtype.newbyteorder("<"), copy=False), requirements="C")
    parts = _COMPLEX_PARTS.get(array.dtype.newbyteorder("="))
    if parts is not None:   # (re, im) pairs along a new last axis
        array = array.reshape(array.shape + (1,)).view(parts)
    return array


def _crc(array):
    return zlib.crc32(np.require(array, requirements="C").reshape(-1).view(np.uint8))


def _serialize(tree, metadata):
    import safetensors.numpy

    leaves, _, names, description = _flatten(tree)
    complex_names = [n for n, leaf in zip(names, leaves) if np.asarray(leaf).dtype.kind == "c"]
    seen = set()
    for name in names:
        if name in seen or name == "__metadata__":
            raise CheckpointError(f"checkpoint.save: two leaves share the name {name!r} (or it "
                                  f"is reserved); rename the dict keys containing '.'")
        seen.add(name)
    tensors = {name: _as_saveable(name, leaf) for name, leaf in zip(names, leaves)}
    header = {"format": _FORMAT, "version": _COMPLEX_VERSION if complex_names else _VERSION,
              "tree": json.dumps(description),
              "crc32": json.dumps({n: _crc(a) for n, a in tensors.items()})}
    if complex_names:
        header["complex"] = json.dumps(complex_names)
    if metadata is not None:
        try:
            header["user"] = json.dumps(metadata)
        except TypeError as e:
            raise CheckpointError(f"checkpoint.save: metadata must be JSON-serialisable "
                                  f"(str, numbers, lists, dicts): {e}") from None
    layout = {n: [_SAFETENSORS_DTYPES[a.dtype.newbyteorder("=")], list(a.shape)]
              for n, a in tensors.items()}
    header["header_crc32"] = _header_crc(header, layout)
    return safetensors.numpy.save(tensors, metadata=header)


def _header_crc(meta, layout):
    """CRC-32 (a decimal string) of everything the header says: the metadata
    fields but this one, and each tensor's safetensors dtype and shape."""
    fields = {k: v for k, v in meta.items() if k != "header_crc32"}
    text = json.dumps({"metadata": fields, "tensors": layout}, sort_keys=True,
                      separators=(",", ":"))
    return str(zlib.crc32(text.encode()))


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
    new one, never a mix, and the next save removes the temporaries that crashed
    writers left. An existing file keeps its permission bits; a new one gets
    0666 & ~umask. If `path` is a symlink, the file it points to is replaced and
    the link is kept. Returns the path of the file written.
    """
    data = _serialize(tree, metadata)
    return write_atomically(path, lambda file: _write(file, data))


# -- loading ----------------------------------------------------------------------------

class _Malformed(Exception):
    """Internal: what is wrong with a header, turned into a CheckpointError."""


def _read_header(path, data):
    """The file's `__metadata__` (our format fields), after checking the framing,
    the format and version, and (version 2) the header checksum."""
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
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise KeyError("format")
    except (ValueError, KeyError, TypeError, RecursionError):
        raise CheckpointError(f"{path}: not an fgrad checkpoint: the safetensors header is not "
                              f"valid JSON or lacks the {_FORMAT!r} metadata") from None
    version = meta.get("version")
    if version not in _READABLE_VERSIONS:
        raise CheckpointError(f"{path}: checkpoint format version {version!r}; this fgrad "
                              f"reads versions {', '.join(_READABLE_VERSIONS)}")
    checked = version != "1" or "header_crc32" in meta
    if checked and meta.get("header_crc32") != _header_crc(meta, _layout(path, header)):
        raise CheckpointError(f"{path}: corrupt checkpoint: the header fails its CRC-32 check "
                              f"(the tree, tensor names, dtypes, shapes or metadata were "
                              f"changed)")
    return meta


def _read_head(file):
    """The 8-byte length and the JSON header it announces (never more than the
    file holds, whatever the length says)."""
    data = file.read(8)
    if len(data) == 8:
        data += file.read(min(int.from_bytes(data, "little"), os.fstat(file.fileno()).st_size))
    return data


def _layout(path, header):
    """{tensor name: [safetensors dtype, shape]} from a parsed safetensors header."""
    layout = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
                and isinstance(entry.get("shape"), list)):
            raise CheckpointError(f"{path}: corrupt checkpoint: the header entry of tensor "
                                  f"{name!r} lacks its dtype or shape")
        layout[name] = [entry["dtype"], entry["shape"]]
    return layout


def _check_description(node, names):
    """Check that `node` is a tree description as `_describe` writes it, appending
    its leaf names to `names`; raise _Malformed otherwise."""
    if node is None:
        return
    if isinstance(node, str):
        names.append(node)
        return
    if not (isinstance(node, dict) and set(node) == {"node", "type", "keys", "children"}
            and node["node"] in _NODES and isinstance(node["type"], str)
            and isinstance(node["keys"], list) and isinstance(node["children"], list)):
        raise _Malformed(f"a tree node is not a {{node, type, keys, children}} record: "
                         f"{str(node)[:80]}")
    keys = node["keys"]
    if len(keys) != len(node["children"]) or not all(isinstance(k, _KEY_TYPES) for k in keys):
        raise _Malformed(f"a {node['node']} node has keys {str(keys)[:80]} for "
                         f"{len(node['children'])} children")
    if node["node"] in ("dict", "record") and len(set(keys)) != len(keys):
        raise _Malformed(f"a {node['node']} node repeats a key: {str(keys)[:80]}")
    for child in node["children"]:
        _check_description(child, names)


def _parse_structure(meta):
    """(tree description, leaf names, {name: crc}) from the format fields."""
    try:
        description = json.loads(meta["tree"])
        crcs = json.loads(meta["crc32"])
        names = []
        _check_description(description, names)
    except (KeyError, TypeError, ValueError, RecursionError) as e:
        raise _Malformed(f"the tree or CRC metadata is missing or not valid JSON ({e})")
    if not isinstance(crcs, dict):
        raise _Malformed("the CRC metadata is not a mapping of tensor names")
    if len(set(names)) != len(names):
        raise _Malformed("two leaves of the tree name the same tensor")
    return description, names, crcs


def _read(path):
    import safetensors.numpy

    path = os.fspath(path)
    with open(path, "rb") as f:
        head = _read_head(f)
        meta = _read_header(path, head)   # checked before the rest is read
        data = head + f.read()
    try:
        tensors = safetensors.numpy.load(data)
        description, names, crcs = _parse_structure(meta)
    except Exception as e:   # safetensors raises its own SafetensorError
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint: {e}") from None
    if set(names) != set(tensors) or set(crcs) != set(tensors):
        unknown = sorted(map(str, (set(names) | set(crcs)) ^ set(tensors)))
        raise CheckpointError(f"{path}: corrupt checkpoint: the metadata and the tensors "
                              f"disagree about {unknown[:5]}")
    for name, array in tensors.items():
        if crcs.get(name) != _crc(array):
            raise CheckpointError(f"{path}: corrupt checkpoint: tensor {name!r} fails its "
                                  f"CRC-32 check (the data bytes were changed)")
    tensors = {n: a.astype(a.dtype.newbyteorder("="), copy=True) for n, a in tensors.items()}
    for name in _complex_names(path, meta, tensors):
        tensors[name] = _as_complex(path, name, tensors[name])
    return path, names, description, tensors


def _complex_names(path, meta, tensors):
    """The tensors that hold complex leaves as real views (version 3's `complex`)."""
    if "complex" not in meta:
        return []
    try:
        names = json.loads(meta["complex"])
        if not (isinstance(names, list) and all(isinstance(n, str) and n in tensors
                                                for n in names)):
            raise ValueError("not a list of tensor names")
    except (TypeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: corrupt checkpoint: the list of complex tensors is "
                              f"malformed ({e})") from None
    return names


def _as_complex(path, name, array):
    """A complex array from its real view (last axis: real and imaginary parts)."""
    if array.dtype not in (np.float32, np.float64) or array.ndim == 0 or array.shape[-1] != 2:
        raise CheckpointError(f"{path}: corrupt checkpoint: complex tensor {name!r} is stored "
                              f"as {_signature(array)}, not float32/float64 pairs")
    dtype = np.complex64 if array.dtype == np.float32 else np.complex128
    return np.ascontiguousarray(array).view(dtype).reshape(array.shape[:-1])


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
        try:
            return _rebuild(description, tensors)
        except RecursionError:
            raise CheckpointError(f"{path}: the checkpoint's tree is nested too deeply to "
                                  f"rebuild") from None
    like_leaves, like_spec, like_names, _ = _flatten(like)
    _check_against(path, names, tensors, like_names, like_leaves)
    return fgrad.tree.unflatten(like_spec, [tensors[n] for n in names])


def load_metadata(path):
    """The `metadata` dict given to `save` (None if there was none)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        user = _read_header(path, _read_head(f)).get("user")
    if user is None:
        return None
    try:
        return json.loads(user)
    except (TypeError, ValueError, RecursionError):
        raise CheckpointError(f"{path}: corrupt checkpoint: the user metadata is not valid "
                              f"JSON") from None
