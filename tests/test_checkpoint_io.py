"""fgrad_nn.checkpoint: bit-exact round trips, templates, damaged files, atomic writes."""
import dataclasses
import json
import os
from typing import NamedTuple

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import checkpoint
from fgrad_nn.checkpoint import CheckpointError

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def sample(dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":   # every bit pattern: NaNs with payloads, infinities, subnormals
        raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
        return raw.view(dtype).reshape(shape)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


class AdamState(NamedTuple):
    count: object
    mu: object
    nu: object


@fgrad.tree.register_dataclass
@dataclasses.dataclass
class Dense:
    weight: object
    bias: object
    features: int = dataclasses.field(default=0, metadata={"static": True})


def nested_tree(rng):
    return {
        "by_dtype": {np.dtype(d).name: sample(d, (3, 2), rng) for d in DTYPES},
        "scalars": [sample(d, (), rng) for d in DTYPES],
        "empty": (sample(np.float32, (0, 4), rng), sample(np.int64, (2, 0, 3), rng)),
        "nothing": None,
        "layers": [{"weight": sample(np.float32, (4, 3), rng), "bias": None}],
        7: sample(np.uint8, (5,), rng),
    }


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_tree(got, want):
    assert fgrad.tree.structure(got) == fgrad.tree.structure(want)
    for g, w in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want), strict=True):
        assert isinstance(g, np.ndarray)
        assert bits_equal(g, w), (g, w)


def test_round_trip_every_dtype_bit_exact(tmp_path):
    tree = nested_tree(np.random.default_rng(0))
    path = tmp_path / "ckpt.safetensors"
    checkpoint.save(path, tree)
    assert_same_tree(checkpoint.load(path), tree)
    assert_same_tree(checkpoint.load(path, like=tree), tree)


def test_tensor_names_are_key_paths(tmp_path):
    from safetensors import safe_open
    tree = {"layers": [{"weight": np.ones((2, 2)), "bias": np.zeros(2)}], "step": np.int32(3)}
    path = str(tmp_path / "c.safetensors")
    checkpoint.save(path, tree)
    with safe_open(path, "np") as f:
        assert sorted(f.keys()) == ["layers.0.bias", "layers.0.weight", "step"]
        np.testing.assert_array_equal(f.get_tensor("layers.0.weight"), np.ones((2, 2)))


def test_fgrad_arrays_and_python_scalars_are_saved(tmp_path):
    tree = {"w": fnp.arange(6.0, dtype=np.float32).reshape(2, 3), "lr": 0.5, "n": 3}
    checkpoint.save(tmp_path / "c", tree)
    out = checkpoint.load(tmp_path / "c")
    assert bits_equal(out["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert out["lr"].shape == () and out["lr"] == 0.5 and out["n"] == 3


def test_like_rebuilds_namedtuples_and_registered_classes(tmp_path):
    rng = np.random.default_rng(1)
    params = [Dense(sample(np.float32, (3, 2), rng), sample(np.float32, (3,), rng), 3)]
    zeros = fgrad.tree.map(np.zeros_like, params)
    state = (AdamState(np.int32(12), params, fgrad.tree.map(np.negative, params)), None)
    tree = {"params": params, "opt_state": state}
    checkpoint.save(tmp_path / "c", tree)

    template = {"params": zeros, "opt_state": (AdamState(np.int32(0), zeros, zeros), None)}
    out = checkpoint.load(tmp_path / "c", like=template)
    assert isinstance(out["opt_state"][0], AdamState)
    assert isinstance(out["params"][0], Dense) and out["params"][0].features == 3
    assert_same_tree(out, tree)

    plain = checkpoint.load(tmp_path / "c")   # without a template: dicts of fields
    assert set(plain["opt_state"][0]) == {"count", "mu", "nu"}
    assert bits_equal(plain["params"][0]["bias"], params[0].bias)


def test_like_accepts_shape_dtype_structs(tmp_path):
    tree = {"a": np.arange(4, dtype=np.int16)}
    checkpoint.save(tmp_path / "c", tree)
    out = checkpoint.load(tmp_path / "c", like={"a": fgrad.ShapeDtypeStruct((4,), np.int16)})
    assert bits_equal(out["a"], tree["a"])


F32_2x3 = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("template,message", [
    ({"a": F32_2x3, "c": np.zeros(1)}, "leaf #1 is 'b' in the file but 'c'"),
    ({"a": np.zeros((3, 2), np.float32), "b": np.zeros(1)},
     r"at 'a': the file has float32\[2, 3\], the template float32\[3, 2\]"),
    ({"a": np.zeros((2, 3)), "b": np.zeros(1)}, r"at 'a'.*float32\[2, 3\].*float64\[2, 3\]"),
    ({"a": F32_2x3},
     "the file has 2 leaves, the template 1; the first one only in the file is 'b'"),
    ({"a": F32_2x3, "b": np.zeros(1), "z": np.zeros(1)}, "first one only in the template is 'z'"),
])
def test_template_mismatch_names_first_difference(tmp_path, template, message):
    checkpoint.save(tmp_path / "c", {"a": np.zeros((2, 3), np.float32), "b": np.zeros(1)})
    with pytest.raises(CheckpointError, match=message):
        checkpoint.load(tmp_path / "c", like=template)


def test_metadata_round_trip(tmp_path):
    checkpoint.save(tmp_path / "c", {"w": np.ones(2)}, metadata={"epoch": 4, "acc": 0.97})
    assert checkpoint.load_metadata(tmp_path / "c") == {"epoch": 4, "acc": 0.97}
    checkpoint.save(tmp_path / "d", {"w": np.ones(2)})
    assert checkpoint.load_metadata(tmp_path / "d") is None


def test_bad_leaves_and_names_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="leaf 'z' has dtype complex256"):
        checkpoint.save(tmp_path / "c", {"z": np.zeros(2, np.clongdouble)})
    with pytest.raises(CheckpointError, match="share the name 'a.b'"):
        checkpoint.save(tmp_path / "c", {"a.b": np.zeros(1), "a": {"b": np.zeros(1)}})
    assert not os.path.exists(tmp_path / "c")


# -- damaged files -----------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, {"w": np.arange(64, dtype=np.float32), "b": np.ones(3)})
    return path


@pytest.mark.parametrize("keep", [0, 5, 20, -1])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep] if keep >= 0 else data[:-10])
    with pytest.raises(CheckpointError, match="truncated") as info:
        checkpoint.load(saved)
    assert str(saved) in str(info.value)


def test_flipped_data_byte_fails_crc(saved):
    data = bytearray(saved.read_bytes())
    data[-5] ^= 0x01
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt checkpoint: tensor 'w' fails its CRC-32"):
        checkpoint.load(saved)


def test_garbage_header(saved):
    data = bytearray(saved.read_bytes())
    data[9:15] = b"@@@@@@"
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="not an fgrad checkpoint"):
        checkpoint.load(saved)


def test_header_is_checked_before_the_data_is_read(tmp_path, monkeypatch):
    """A large file that is not a checkpoint is refused after reading its header only."""
    import builtins
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.write((16).to_bytes(8, "little") + b'{"a": 1}        ')
        f.truncate(64 << 20)
    reads = []
    real_open = builtins.open

    def counting_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if os.fspath(file) == str(path):
            real_read = handle.read
            handle = _Reads(handle, real_read, reads)
        return handle

    monkeypatch.setattr(builtins, "open", counting_open)
    with pytest.raises(CheckpointError, match="not an fgrad checkpoint"):
        checkpoint.load(path)
    assert sum(reads) <= 8 + 16


class _Reads:
    """A file wrapper counting the bytes read through it."""

    def __init__(self, handle, read, log):
        self._handle, self._read, self._log = handle, read, log

    def read(self, *args):
        out = self._read(*args)
        self._log.append(len(out))
        return out

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def test_foreign_safetensors_file(tmp_path):
    import safetensors.numpy
    path = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"x": np.ones(2)}, str(path))
    with pytest.raises(CheckpointError, match="lacks the 'fgrad.checkpoint' metadata"):
        checkpoint.load(path)


def split_file(path):
    """(parsed safetensors header, the bytes after it) of a checkpoint file."""
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + size]), data[8 + size:]


def write_file(path, header, body):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + body)


def forge(path, edit, reseal=True):
    """Apply `edit` to the parsed header of the checkpoint at `path`; with reseal,
    recompute the header checksum as a (buggy or hostile) writer would, so that the
    damage reaches the checks behind it."""
    header, body = split_file(path)
    edit(header)
    meta = header["__metadata__"]
    if reseal and isinstance(meta, dict) and "header_crc32" in meta:
        layout = {n: [e.get("dtype"), e.get("shape")] for n, e in header.items()
                  if n != "__metadata__"}
        meta["header_crc32"] = checkpoint._header_crc(meta, layout)
    write_file(path, header, body)


def edit_tree(change):
    def edit(header):
        tree = json.loads(header["__metadata__"]["tree"])
        tree = change(tree)
        header["__metadata__"]["tree"] = tree if isinstance(tree, str) else json.dumps(tree)
    return edit


def test_tree_naming_a_missing_tensor(saved):
    forge(saved, edit_tree(lambda t: {**t, "children": ["v"] + t["children"][1:]}))
    with pytest.raises(CheckpointError, match="disagree about"):
        checkpoint.load(saved)


def set_meta(key, value):
    def edit(header):
        header["__metadata__"][key] = value
    return edit


def deep_list(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("edit", [
    edit_tree(lambda t: "{not json"),
    edit_tree(lambda t: deep_list(100_000)),
    edit_tree(lambda t: {**t, "children": t["children"][:1]}),
    edit_tree(lambda t: {k: v for k, v in t.items() if k != "children"}),
    edit_tree(lambda t: {**t, "keys": ["w", "w"]}),
    edit_tree(lambda t: {**t, "node": "set"}),
    edit_tree(lambda t: {**t, "keys": [["w"], "b"]}),
    edit_tree(lambda t: {**t, "children": ["w", "w"], "keys": ["w", "b"]}),
    edit_tree(lambda t: [t] * 3),
    edit_tree(lambda t: 17),
    set_meta("crc32", "[1, 2]"),
    set_meta("crc32", deep_list(100_000)),
    set_meta("version", "9"),
    lambda h: h["__metadata__"].pop("header_crc32"),
    lambda h: h["__metadata__"].pop("tree"),
    lambda h: h.__setitem__("w", {"dtype": "F32"}),
    lambda h: h.__setitem__("__metadata__", ["fgrad.checkpoint"]),
], ids=["tree-json", "tree-deep", "children-short", "no-children", "repeated-key", "node-kind",
        "key-type", "leaf-twice", "tree-list", "tree-int", "crc-list", "crc-deep", "version",
        "no-header-crc", "no-tree", "no-shape", "metadata-list"])
def test_malformed_headers_raise_checkpoint_error(saved, edit):
    forge(saved, edit)
    with pytest.raises(CheckpointError):
        checkpoint.load(saved)


@pytest.mark.parametrize("user", ["{not json", deep_list(100_000)])
def test_malformed_user_metadata_raises_checkpoint_error(tmp_path, user):
    path = tmp_path / "c"
    checkpoint.save(path, {"w": np.ones(2)}, metadata={"epoch": 1})
    forge(path, set_meta("user", user))
    with pytest.raises(CheckpointError, match="user metadata is not valid JSON"):
        checkpoint.load_metadata(path)


@pytest.mark.parametrize("edit", [
    edit_tree(lambda t: {**t, "keys": ["v", "b"]}),      # a dict key renamed
    set_meta("user", json.dumps({"epoch": 5})),           # the user metadata changed
    lambda h: h["w"].__setitem__("shape", [8, 8]),        # same bytes, another shape
], ids=["key", "user", "shape"])
def test_header_changes_fail_the_header_checksum(saved, edit):
    checkpoint.save(saved, {"w": np.arange(64, dtype=np.float32), "b": np.ones(3)},
                    metadata={"epoch": 4})
    forge(saved, edit, reseal=False)
    for read in (checkpoint.load, checkpoint.load_metadata):
        with pytest.raises(CheckpointError, match="header fails its CRC-32 check"):
            read(saved)


def test_version_1_files_without_header_checksum_still_load(saved):
    def as_version_1(header):
        header["__metadata__"]["version"] = "1"
        del header["__metadata__"]["header_crc32"]
    forge(saved, as_version_1)
    out = checkpoint.load(saved)
    assert bits_equal(out["w"], np.arange(64, dtype=np.float32))
    forge(saved, set_meta("header_crc32", "123"), reseal=False)   # claims one: checked
    with pytest.raises(CheckpointError, match="header fails its CRC-32 check"):
        checkpoint.load(saved)


def test_every_header_bit_flip_is_detected_or_harmless(tmp_path):
    """Flip each bit of the length prefix and JSON header of a small checkpoint:
    every load either raises CheckpointError or returns exactly the saved tree and
    metadata (no renamed key, changed shape or metadata slips through)."""
    rng = np.random.default_rng(3)
    tree = {"enc": {"w": sample(np.float32, (2, 3), rng), "b": sample(np.int8, (3,), rng)},
            "dec": [sample(np.float64, (2,), rng), None], "step": np.int64(7)}
    metadata = {"epoch": 3, "name": "run"}
    path = tmp_path / "c"
    checkpoint.save(path, tree, metadata=metadata)
    assert_same_tree(checkpoint.load(path), tree)
    data = path.read_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    with open(path, "r+b") as patch:   # one byte changed in place, then restored
        for bit in range(8 * header_end):
            byte = data[bit // 8]
            write_byte(patch, bit // 8, byte ^ (1 << (bit % 8)))
            assert_refused_or_unchanged(path, tree, metadata)
            write_byte(patch, bit // 8, byte)


def write_byte(file, offset, value):
    file.seek(offset)
    file.write(bytes([value]))
    file.flush()


def assert_refused_or_unchanged(path, tree, metadata):
    try:
        out = checkpoint.load(path)
    except CheckpointError:
        pass
    else:
        assert_same_tree(out, tree)
    try:
        assert checkpoint.load_metadata(path) == metadata
    except CheckpointError:
        pass


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        checkpoint.load(tmp_path / "absent.safetensors")


# -- atomic writes -----------------------------------------------------------------------

def test_crash_mid_write_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    old = {"w": np.arange(10.0)}
    checkpoint.save(path, old)
    before = path.read_bytes()

    def write_half_then_crash(file, data):
        file.write(bytes(data[:len(data) // 2]))
        file.flush()
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(checkpoint, "_write", write_half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(path, {"w": np.arange(1000.0)})
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["c.safetensors"]
    assert_same_tree(checkpoint.load(path), old)


def test_save_overwrites(tmp_path):
    path = tmp_path / "c"
    checkpoint.save(path, {"w": np.zeros(3)})
    checkpoint.save(path, {"w": np.ones(3)})
    assert bits_equal(checkpoint.load(path)["w"], np.ones(3))
    assert os.listdir(tmp_path) == ["c"]


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_new_files_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    path = tmp_path / "model.safetensors"
    checkpoint.save(path, {"w": np.ones(3, np.float32)})
    assert (path.stat().st_mode & 0o777) == (0o666 & ~mask)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_resave_keeps_the_files_mode(tmp_path, umask, mode):
    umask(0o022)
    path = tmp_path / "model.safetensors"
    checkpoint.save(path, {"w": np.zeros(3)})
    os.chmod(path, mode)
    checkpoint.save(path, {"w": np.ones(3)})
    assert (path.stat().st_mode & 0o777) == mode
    assert bits_equal(checkpoint.load(path)["w"], np.ones(3))


def test_saving_through_a_symlink_replaces_its_target(tmp_path):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "step-100.safetensors"
    link = tmp_path / "latest.safetensors"
    checkpoint.save(target, {"w": np.zeros(3)})
    os.chmod(target, 0o600)
    link.symlink_to(target)
    assert checkpoint.save(link, {"w": np.ones(3)}) == str(target)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert (target.stat().st_mode & 0o777) == 0o600
    assert bits_equal(checkpoint.load(target)["w"], np.ones(3))
    assert sorted(os.listdir(tmp_path / "runs")) == ["step-100.safetensors"]


def test_saving_through_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "latest"
    link.symlink_to(tmp_path / "new")
    checkpoint.save(link, {"w": np.ones(3)})
    assert link.is_symlink()
    assert bits_equal(checkpoint.load(tmp_path / "new")["w"], np.ones(3))


# -- complex leaves ----------------------------------------------------------------------

def test_complex_leaves_are_real_views_with_a_trailing_axis_of_two(tmp_path):
    import safetensors.numpy
    z = np.array([[1 + 2j, -0.5j], [np.nan + 1j, 3.0]], np.complex64)
    path = tmp_path / "z.safetensors"
    checkpoint.save(path, {"z": fnp.asarray(z), "s": np.complex128(2 - 1j), "x": np.ones(2)})
    raw = safetensors.numpy.load_file(str(path))     # any safetensors reader
    assert raw["z"].dtype == np.float32 and raw["z"].shape == (2, 2, 2)
    np.testing.assert_array_equal(raw["z"][..., 0], z.real)
    np.testing.assert_array_equal(raw["z"][..., 1], z.imag)
    assert raw["s"].dtype == np.float64 and raw["s"].shape == (2,)
    header, _ = split_file(path)
    assert header["__metadata__"]["version"] == "3"
    assert sorted(json.loads(header["__metadata__"]["complex"])) == ["s", "z"]
    out = checkpoint.load(path)
    assert bits_equal(out["z"], z) and bits_equal(out["s"], np.array(2 - 1j))
    assert bits_equal(out["x"], np.ones(2))


def test_real_only_checkpoints_keep_version_2(saved):
    header, _ = split_file(saved)
    assert header["__metadata__"]["version"] == "2" and "complex" not in header["__metadata__"]


@pytest.mark.parametrize("complex_field", ['["w", "nope"]', '{"w": 1}', 'not json'])
def test_malformed_complex_list_raises(saved, complex_field):
    forge(saved, set_meta("complex", complex_field))
    with pytest.raises(CheckpointError, match="complex tensors is malformed"):
        checkpoint.load(saved)


def test_complex_list_naming_a_non_pair_tensor_raises(saved):
    forge(saved, set_meta("complex", '["w"]'))     # w is float32[64]: not (re, im) pairs
    with pytest.raises(CheckpointError, match="not float32/float64 pairs"):
        checkpoint.load(saved)
