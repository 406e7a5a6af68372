"""fgrad_nn.data: readers on tiny files written here, the digits default,
datasets, DataLoader order/batching, and transforms."""
import gzip
import os

import numpy as np
import pytest

from fgrad_nn import data
from fgrad_nn.data import (ArrayDataset, DataFileError, DataLoader, Flatten, Normalize, OneHot,
                           RandomCrop, RandomHorizontalFlip)


# -- IDX (MNIST / Fashion-MNIST) ---------------------------------------------------------

def idx_bytes(array, type_code=0x08):
    dtype = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    header = bytes([0, 0, type_code, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    return header + np.asarray(array, dtype[type_code]).tobytes()


def write(path, payload, gz=False):
    path = str(path) + (".gz" if gz else "")
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(payload)
    return path


def tiny_mnist(directory, split="train", n=5, gz=False, rows=4, cols=3):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (n, rows, cols), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    stem = "train" if split == "train" else "t10k"
    write(directory / f"{stem}-images-idx3-ubyte", idx_bytes(images), gz)
    write(directory / f"{stem}-labels-idx1-ubyte", idx_bytes(labels), gz)
    return images, labels


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("split", ["train", "test"])
def test_load_mnist_raw_and_gzip(tmp_path, gz, split):
    images, labels = tiny_mnist(tmp_path, split, gz=gz)
    x, y = data.load_mnist(tmp_path, split=split, kind="fashion")
    assert x.dtype == np.uint8 and x.shape == (5, 1, 4, 3)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(x[:, 0], images)
    np.testing.assert_array_equal(y, labels)


@pytest.mark.parametrize("type_code,dtype", [(0x09, np.int8), (0x0B, np.int16),
                                             (0x0C, np.int32), (0x0D, np.float32),
                                             (0x0E, np.float64)])
def test_read_idx_every_type(tmp_path, type_code, dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    path = write(tmp_path / "a.idx", idx_bytes(array, type_code))
    out = data.read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, array)


def test_mnist_missing_file_names_it(tmp_path):
    tiny_mnist(tmp_path)
    os.remove(tmp_path / "train-labels-idx1-ubyte")
    with pytest.raises(FileNotFoundError, match="train-labels-idx1-ubyte") as info:
        data.load_mnist(tmp_path)
    assert str(tmp_path) in str(info.value) and ".gz" in str(info.value)


def test_mnist_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.load_mnist(tmp_path / "nowhere")


@pytest.mark.parametrize("gz", [False, True])
def test_idx_truncated(tmp_path, gz):
    images = np.zeros((4, 5, 5), np.uint8)
    path = write(tmp_path / "x.idx", idx_bytes(images)[:-7], gz)
    with pytest.raises(DataFileError, match="truncated") as info:
        data.read_idx(path)
    assert "x.idx" in str(info.value) and "(4, 5, 5)" in str(info.value)


def test_idx_trailing_bytes_is_size_mismatch(tmp_path):
    path = write(tmp_path / "x.idx", idx_bytes(np.zeros((2, 2), np.uint8)) + b"\0")
    with pytest.raises(DataFileError, match="size mismatch.*trailing"):
        data.read_idx(path)


def test_gzip_stream_cut_short(tmp_path):
    payload = gzip.compress(idx_bytes(np.arange(200, dtype=np.uint8).reshape(10, 20)))
    path = tmp_path / "x.idx.gz"
    path.write_bytes(payload[:len(payload) // 2])
    with pytest.raises(DataFileError, match="gzip stream is truncated") as info:
        data.read_idx(str(path))
    assert "x.idx.gz" in str(info.value)


def test_idx_huge_dimensions_are_a_size_mismatch(tmp_path):
    """Dimensions whose product overflows 64 bits (and wraps to a small number in
    NumPy) are compared exactly with the file's size."""
    dims = (2**32 - 1, 2**32 - 1, 2**32 - 1, 2**32 - 1)
    header = bytes([0, 0, 0x08, 4]) + b"".join(d.to_bytes(4, "big") for d in dims)
    for gz in (False, True):
        path = write(tmp_path / "x.idx", header + b"\0" * 16, gz)
        with pytest.raises(DataFileError, match=r"size mismatch \(truncated\).*"
                           rf"i\.e\. {20 + (2**32 - 1)**4} bytes"):
            data.read_idx(path)


class CountingGzip:
    """gzip.open whose streams count the decompressed bytes handed out."""

    def __init__(self, monkeypatch):
        self.read_total = 0
        self.open = gzip.open
        monkeypatch.setattr(gzip, "open", self)

    def __call__(self, path, mode="rb"):
        stream = self.open(path, mode)
        original = stream.read

        def read(size=-1):
            out = original(size)
            self.read_total += len(out)
            return out

        stream.read = read
        return stream


def gzip_of(header, zeros):
    """A gzip stream of `header` followed by `zeros` zero bytes, built in chunks."""
    pack = __import__("zlib").compressobj(9, wbits=31)
    parts = [pack.compress(header)]
    block = bytes(1 << 20)
    for start in range(0, zeros, len(block)):
        parts.append(pack.compress(block[:min(len(block), zeros - start)]))
    return b"".join(parts) + pack.flush()


def test_gzip_bomb_is_not_decompressed_past_the_declared_size(tmp_path, monkeypatch):
    path = tmp_path / "bomb-idx1-ubyte.gz"
    path.write_bytes(gzip_of(idx_bytes(np.arange(10, dtype=np.uint8)), 64 << 20))
    counting = CountingGzip(monkeypatch)
    with pytest.raises(DataFileError, match="size mismatch \\(has trailing bytes\\).*10"):
        data.read_idx(str(path))
    assert counting.read_total <= 4 + 4 + 10 + 1


def test_gzip_declaring_more_than_it_can_hold_fails_before_reading(tmp_path, monkeypatch):
    header = bytes([0, 0, 0x0E, 1]) + (2**31).to_bytes(4, "big")
    path = write(tmp_path / "x.idx", header + b"\0" * 64, gz=True)
    counting = CountingGzip(monkeypatch)
    with pytest.raises(DataFileError, match="gzip file decompresses to at most"):
        data.read_idx(path)
    assert counting.read_total == len(header)


def test_idx_wrong_magic(tmp_path):
    path = write(tmp_path / "x.idx", b"\x12\x34\x08\x01" + (3).to_bytes(4, "big") + b"abc")
    with pytest.raises(DataFileError, match="wrong magic number 0x12340801") as info:
        data.read_idx(path)
    assert "x.idx" in str(info.value)


def test_mnist_images_file_with_label_magic(tmp_path):
    tiny_mnist(tmp_path)
    write(tmp_path / "train-images-idx3-ubyte", idx_bytes(np.zeros(5, np.uint8)))
    with pytest.raises(DataFileError, match="wrong magic number for images") as info:
        data.load_mnist(tmp_path)
    assert "train-images-idx3-ubyte" in str(info.value)


def test_mnist_labels_file_of_images_refused_from_its_header(tmp_path, monkeypatch):
    tiny_mnist(tmp_path, gz=True)
    images = np.zeros((300, 28, 28), np.uint8)
    write(tmp_path / "train-labels-idx1-ubyte", idx_bytes(images), gz=True)
    counting = CountingGzip(monkeypatch)
    with pytest.raises(DataFileError, match=r"wrong magic number for labels.*shape "
                                            r"\(300, 28, 28\)"):
        data.load_mnist(tmp_path)
    images_read = 4 + 3 * 4 + 5 * 4 * 3 + 1      # the tiny images file, + 1 byte
    assert counting.read_total <= images_read + 4 + 3 * 4   # the labels' header only


def test_mnist_count_mismatch(tmp_path):
    tiny_mnist(tmp_path)
    write(tmp_path / "train-labels-idx1-ubyte", idx_bytes(np.zeros(4, np.uint8)))
    with pytest.raises(DataFileError, match="size mismatch.*5 images.*4 labels"):
        data.load_mnist(tmp_path)


# -- CIFAR-10 binary ---------------------------------------------------------------------

def cifar_batch(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    records = np.concatenate([labels[:, None], images.reshape(n, -1)], axis=1)
    return images, labels, records.tobytes()


def tiny_cifar(directory):
    directory.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, name in enumerate([f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]):
        images, labels, payload = cifar_batch(2 + i % 2, seed=i)
        (directory / name).write_bytes(payload)
        parts.append((images, labels))
    return parts


@pytest.mark.parametrize("child", [False, True])
def test_load_cifar10(tmp_path, child):
    parts = tiny_cifar(tmp_path / "cifar-10-batches-bin" if child else tmp_path)
    x, y = data.load_cifar10(tmp_path, "train")
    assert x.shape == (12, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    np.testing.assert_array_equal(x, np.concatenate([p[0] for p in parts[:5]]))
    np.testing.assert_array_equal(y, np.concatenate([p[1] for p in parts[:5]]))
    xt, yt = data.load_cifar10(tmp_path, "test")
    np.testing.assert_array_equal(xt, parts[5][0])
    np.testing.assert_array_equal(yt, parts[5][1])


def test_cifar_channel_layout(tmp_path):
    record = bytes([7]) + bytes([1] * 1024 + [2] * 1024 + [3] * 1024)
    (tmp_path / "test_batch.bin").write_bytes(record)
    x, y = data.load_cifar10(tmp_path, "test")
    assert y.tolist() == [7]
    assert [int(np.unique(x[0, c])[0]) for c in range(3)] == [1, 2, 3]


def test_cifar_missing_files_named(tmp_path):
    tiny_cifar(tmp_path)
    os.remove(tmp_path / "data_batch_3.bin")
    os.remove(tmp_path / "data_batch_5.bin")
    with pytest.raises(FileNotFoundError, match="data_batch_3.bin, data_batch_5.bin") as info:
        data.load_cifar10(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_cifar_truncated(tmp_path):
    tiny_cifar(tmp_path)
    payload = (tmp_path / "data_batch_2.bin").read_bytes()
    (tmp_path / "data_batch_2.bin").write_bytes(payload[:-100])
    with pytest.raises(DataFileError, match="data_batch_2.bin: size mismatch.*truncated"):
        data.load_cifar10(tmp_path)


def test_cifar_bad_label(tmp_path):
    tiny_cifar(tmp_path)
    payload = bytearray((tmp_path / "test_batch.bin").read_bytes())
    payload[3073] = 200
    (tmp_path / "test_batch.bin").write_bytes(bytes(payload))
    with pytest.raises(DataFileError, match="test_batch.bin: record 1 has label 200"):
        data.load_cifar10(tmp_path, "test")


# -- digits (the offline default) --------------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    return data.load_digits()


def test_digits(digits):
    x, y = digits
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(np.unique(x * 16).tolist()) == set(range(17))   # the 0..16 grey levels
    assert sorted(set(y.tolist())) == list(range(10))


def test_digits_split_fixed_and_stratified(digits):
    x, y = digits
    a = data.load_digits_split(test_size=0.2, seed=0)
    b = data.load_digits_split(test_size=0.2, seed=0)
    c = data.load_digits_split(test_size=0.2, seed=1)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[3], c[3])
    x_train, x_test, y_train, y_test = a
    assert len(x_test) == round(0.2 * 1797) and len(x_train) + len(x_test) == 1797
    share = np.bincount(y_test, minlength=10) / np.bincount(y, minlength=10)
    assert np.all(np.abs(share - 0.2) < 0.02)
    # train and test are disjoint and cover every image
    rows = {r.tobytes() for r in x.reshape(1797, -1)}
    parts = [r.tobytes() for r in np.concatenate([x_train, x_test]).reshape(1797, -1)]
    assert set(parts) == rows


def test_train_test_split_unstratified_counts():
    x, y = np.arange(10), np.arange(10) * 2
    x_tr, x_te, y_tr, y_te = data.train_test_split(x, y, test_size=3, seed=5)
    assert len(x_te) == 3 and sorted(np.concatenate([x_tr, x_te]).tolist()) == list(range(10))
    np.testing.assert_array_equal(y_te, 2 * x_te)


# -- datasets ----------------------------------------------------------------------------

def test_array_dataset_length_mismatch_names_lengths():
    with pytest.raises(ValueError, match=r"different lengths \[3, 4\]"):
        ArrayDataset(np.zeros((3, 2)), np.zeros(4))


def test_array_dataset_getitem_and_gather():
    x, y = np.arange(12).reshape(6, 2), np.arange(6) * 10
    ds = ArrayDataset(x, y)
    assert len(ds) == 6 and isinstance(ds, data.Dataset)
    xi, yi = ds[4]
    np.testing.assert_array_equal(xi, x[4])
    assert yi == 40
    xb, yb = ds.gather(np.array([5, 0, 3]))
    np.testing.assert_array_equal(xb, x[[5, 0, 3]])
    np.testing.assert_array_equal(yb, y[[5, 0, 3]])


def test_subset_and_random_split():
    ds = ArrayDataset(np.arange(10))
    parts = data.random_split(ds, [7, 3], seed=0)
    seen = np.concatenate([p.gather(np.arange(len(p)))[0] for p in parts])
    assert sorted(seen.tolist()) == list(range(10))
    again = data.random_split(ds, [0.7, 0.3], seed=0)
    np.testing.assert_array_equal(again[1].indices, parts[1].indices)
    with pytest.raises(ValueError, match="sum to the dataset's length 10"):
        data.random_split(ds, [5, 4], seed=0)


class PySamples:
    """A dataset without `gather`: samples built in Python."""

    def __len__(self):
        return 7

    def __getitem__(self, i):
        return np.full((2,), i, np.float32), np.int64(i % 3)


# -- DataLoader --------------------------------------------------------------------------

def all_indices(loader):
    return np.concatenate([xb for xb, in loader])


def test_loader_every_sample_once_per_epoch():
    loader = DataLoader(ArrayDataset(np.arange(23)), batch_size=5, shuffle=True, seed=3)
    orders = [all_indices(loader) for _ in range(4)]
    for order in orders:
        assert sorted(order.tolist()) == list(range(23))
    assert len({o.tobytes() for o in orders}) == 4          # a new order each epoch
    assert not np.array_equal(orders[0], np.arange(23))


def test_loader_order_fixed_by_seed_and_epoch():
    make = lambda seed: DataLoader(ArrayDataset(np.arange(50)), 8, shuffle=True, seed=seed)
    a, b, c = make(11), make(11), make(12)
    first_a, first_b, first_c = all_indices(a), all_indices(b), all_indices(c)
    np.testing.assert_array_equal(first_a, first_b)
    assert not np.array_equal(first_a, first_c)
    second_a = all_indices(a)
    b.set_epoch(1)
    np.testing.assert_array_equal(all_indices(b), second_a)
    np.testing.assert_array_equal(a.order(0), first_a)


def test_loader_accepts_fgrad_key():
    import fgrad
    key = fgrad.random.key(7)
    one = DataLoader(ArrayDataset(np.arange(20)), 4, shuffle=True, seed=key)
    two = DataLoader(ArrayDataset(np.arange(20)), 4, shuffle=True, seed=np.asarray(key))
    np.testing.assert_array_equal(all_indices(one), all_indices(two))


def test_loader_shuffle_needs_seed():
    with pytest.raises(ValueError, match="shuffle=True needs seed="):
        DataLoader(ArrayDataset(np.arange(4)), 2, shuffle=True)


@pytest.mark.parametrize("option", ["shuffle", "drop_last"])
def test_loader_flags_refuse_strings(option):
    with pytest.raises(ValueError, match=f"DataLoader: {option} must be True or False"):
        DataLoader(ArrayDataset(np.arange(4)), 2, seed=0, **{option: "False"})


def test_loader_partial_last_batch_and_drop_last():
    ds = ArrayDataset(np.arange(10), np.arange(10))
    keep = DataLoader(ds, 4)
    assert len(keep) == 3 and [len(x) for x, _ in keep] == [4, 4, 2]
    np.testing.assert_array_equal(all_indices(DataLoader(ArrayDataset(np.arange(10)), 4)),
                                  np.arange(10))
    drop = DataLoader(ds, 4, drop_last=True, shuffle=True, seed=0)
    sizes = [len(x) for x, _ in drop]
    assert len(drop) == 2 and sizes == [4, 4]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_loader_generic_dataset_stacks(prefetch):
    loader = DataLoader(PySamples(), 3, shuffle=True, seed=0, prefetch=prefetch)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(3, 2), (3, 2), (1, 2)]
    xs = np.concatenate([b[0][:, 0] for b in batches])
    ys = np.concatenate([b[1] for b in batches])
    assert sorted(xs.tolist()) == list(range(7))
    np.testing.assert_array_equal(ys, xs.astype(np.int64) % 3)


def test_prefetch_gives_same_batches_and_propagates_errors():
    x = np.arange(40, dtype=np.float32).reshape(10, 1, 2, 2)
    kw = dict(batch_size=3, shuffle=True, seed=4, transforms=[RandomHorizontalFlip()])
    plain = [b[0] for b in DataLoader(ArrayDataset(x), prefetch=0, **kw)]
    ahead = [b[0] for b in DataLoader(ArrayDataset(x), prefetch=2, **kw)]
    for u, v in zip(plain, ahead, strict=True):
        np.testing.assert_array_equal(u, v)

    class Broken(PySamples):
        def __getitem__(self, i):
            if i == 5:
                raise RuntimeError("sample 5 is broken")
            return super().__getitem__(i)

    with pytest.raises(RuntimeError, match="sample 5 is broken"):
        list(DataLoader(Broken(), 2, prefetch=2))


def test_prefetch_default_follows_batch_cost():
    small = ArrayDataset(np.zeros((300, 64), np.float32))            # 32 KiB per batch
    large = ArrayDataset(np.zeros((300, 3, 32, 32), np.float32))     # 1.5 MiB per batch
    assert DataLoader(small, 128).prefetch == 0
    assert DataLoader(small, 128, transforms=[Flatten()]).prefetch == 2
    assert DataLoader(large, 128).prefetch == 2
    assert DataLoader(data.Subset(large, np.arange(10)), 128).prefetch == 2
    assert DataLoader(PySamples(), 2).prefetch == 2
    assert DataLoader(PySamples(), 2, prefetch=0).prefetch == 0


def test_prefetch_stops_when_consumer_breaks():
    loader = DataLoader(PySamples(), 1, prefetch=1)
    for i, _ in enumerate(loader):
        if i == 1:
            break
    assert len(list(loader)) == 7      # the next epoch runs normally


class Hanging(PySamples):
    """Sample 3 waits until released: a stuck __getitem__. It gives up after 5 s so
    that a loader which waits for it fails these tests rather than hangs them."""

    def __init__(self):
        import threading
        self.entered, self.release = threading.Event(), threading.Event()

    def __getitem__(self, i):
        if i == 3:
            self.entered.set()
            self.release.wait(5)
        return super().__getitem__(i)


@pytest.fixture
def hanging():
    dataset = Hanging()
    yield dataset
    dataset.release.set()


def test_leaving_the_loop_does_not_wait_for_a_stuck_sample(hanging):
    import time
    batches = iter(DataLoader(hanging, 1, prefetch=1))
    for _ in range(3):
        next(batches)
    assert hanging.entered.wait(5)
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match="prefetch thread is still preparing a batch"):
        batches.close()
    assert time.monotonic() - start < 2.5


def test_timeout_raises_when_a_batch_does_not_come(hanging):
    import time
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match="left running as a daemon thread"):
        with pytest.raises(TimeoutError, match="batch 3 was not ready after timeout=0.3"):
            list(DataLoader(hanging, 1, prefetch=1, timeout=0.3))
    assert time.monotonic() - start < 2.5
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        DataLoader(hanging, 1, timeout=0)


def test_ctrl_c_stops_a_loop_waiting_for_a_stuck_sample_at_once(hanging):
    import signal
    import threading
    import time
    main = threading.main_thread().ident
    sent = []

    def interrupt():
        hanging.entered.wait(5)
        time.sleep(0.1)
        sent.append(time.monotonic())
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        for _ in DataLoader(hanging, 1, prefetch=1):
            pass
    assert time.monotonic() - sent[0] < 0.5


# -- transforms --------------------------------------------------------------------------

def test_normalize_flatten_one_hot_exact():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (6, 3, 4, 4)).astype(np.uint8)
    y = rng.integers(0, 5, 6)
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    loader = DataLoader(ArrayDataset(x, y), 4,
                        transforms=[Normalize(mean, std), Flatten(), OneHot(5)])
    xb, yb = next(iter(loader))
    expected = (x[:4].astype(np.float32) - np.float32(mean)[None, :, None, None]) \
        / np.float32(std)[None, :, None, None]
    assert xb.dtype == np.float32 and xb.shape == (4, 48)
    np.testing.assert_array_equal(xb, expected.reshape(4, 48))
    assert yb.dtype == np.float32 and yb.shape == (4, 5)
    np.testing.assert_array_equal(yb, np.eye(5, dtype=np.float32)[y[:4]])


def test_normalize_checks_channels():
    with pytest.raises(ValueError, match="3 channel means/stds.*shape \\(2, 4, 5, 5\\)"):
        Normalize([0, 0, 0], [1, 1, 1])(np.zeros((2, 4, 5, 5)))


def test_one_hot_rejects_out_of_range():
    with pytest.raises(ValueError, match=r"\[0, 3\).*from 0 to 3"):
        OneHot(3)(np.array([0, 3]))


def test_random_crop_and_flip_shapes_and_reproducibility():
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6) + 1
    x = np.concatenate([x] * 8)
    make = lambda seed: DataLoader(
        ArrayDataset(x), 16, seed=seed,
        transforms=[RandomCrop(6, padding=2), RandomHorizontalFlip()])
    a, b, c = make(0), make(0), make(1)
    first, again, other = next(iter(a))[0], next(iter(b))[0], next(iter(c))[0]
    assert first.shape == x.shape
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert not np.array_equal(next(iter(a))[0], first)   # the next epoch differs
    assert np.any(first == 0)   # some crops reach into the zero padding


def test_random_crop_is_a_window_of_the_padded_image():
    x = np.random.default_rng(0).random((5, 2, 4, 4))
    out = RandomCrop(3, padding=1)(x, np.random.default_rng(0))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for n in range(5):
        windows = [padded[n, :, i:i + 3, j:j + 3] for i in range(4) for j in range(4)]
        assert any(np.array_equal(out[n], w) for w in windows)


def test_flip_mirrors_some_images():
    x = np.random.default_rng(0).random((64, 1, 2, 3))
    out = RandomHorizontalFlip(0.5)(x, np.random.default_rng(0))
    flipped = np.array([np.array_equal(o, i[..., ::-1]) for o, i in zip(out, x)])
    kept = np.array([np.array_equal(o, i) for o, i in zip(out, x)])
    assert np.all(flipped ^ kept) and 10 < flipped.sum() < 54


def test_random_transform_needs_seed():
    with pytest.raises(ValueError, match="needs seed="):
        DataLoader(ArrayDataset(np.zeros((2, 1, 2, 2))), 1, transforms=[RandomCrop(2)])
    with pytest.raises(ValueError, match="numpy Generator"):
        RandomCrop(2)(np.zeros((1, 1, 2, 2)))
