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
          np.uint64, np.float16, np.float32, np.float64]


def sample(dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":   # every bit pattern: NaNs with payloads, infinities, subnormals
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
    with pytest.raises(CheckpointError, match="leaf 'z' has dtype complex128"):
        checkpoint.save(tmp_path / "c", {"z": np.zeros(2, complex)})
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


def test_foreign_safetensors_file(tmp_path):
    import safetensors.numpy
    path = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"x": np.ones(2)}, str(path))
    with pytest.raises(CheckpointError, match="lacks the 'fgrad.checkpoint' metadata"):
        checkpoint.load(path)


def test_tree_naming_a_missing_tensor(saved):
    data = saved.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    tree = json.loads(header["__metadata__"]["tree"])
    tree["children"][0] = "v"
    header["__metadata__"]["tree"] = json.dumps(tree)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    saved.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + size:])
    with pytest.raises(CheckpointError, match="disagree about"):
        checkpoint.load(saved)


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


def test_saved_files_get_the_usual_permissions(tmp_path):
    import os
    from fgrad_nn import checkpoint
    path = tmp_path / "model.safetensors"
    checkpoint.save(path, {"w": np.ones(3, np.float32)})
    mask = os.umask(0)
    os.umask(mask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~mask)
