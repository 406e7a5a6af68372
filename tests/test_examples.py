"""The examples: a short ResMLP training run on the digits, the checkpoint round
trip, and every script run end to end with small settings."""
import gzip
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import fgrad
from fgrad_nn.training import Progress, evaluate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


resmlp = load_example("resmlp")
two_layer = load_example("two_layer")
per_example = load_example("per_example_grads")
cnn = load_example("cnn")
lstm = load_example("lstm")
transformer = load_example("transformer")


def run_script(name, *args, timeout=120):
    """Run examples/<name>.py in a fresh interpreter; return its stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{name}.py failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# -- tiny data files in the standard formats ---------------------------------------------

def write_idx(path, array):
    ndim = array.ndim
    header = bytes([0, 0, 0x08, ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def striped_images(n, shape, seed):
    """Images whose class k brightens the k-th band of rows (learnable), plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 60, (n,) + shape).astype(np.uint8)
    band = shape[-2] // 10
    for i, k in enumerate(labels):
        images[i, ..., k * band:(k + 1) * band, :] = 220
    return images, labels


def tiny_mnist(directory):
    for stem, n, seed in (("train", 300, 0), ("t10k", 100, 1)):
        images, labels = striped_images(n, (28, 28), seed)
        write_idx(directory / f"{stem}-images-idx3-ubyte.gz", images)
        write_idx(directory / f"{stem}-labels-idx1-ubyte.gz", labels)


def tiny_cifar(directory):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for seed, name in enumerate(names):
        images, labels = striped_images(40, (3, 32, 32), seed)
        records = np.concatenate([labels[:, None].astype(np.uint8), images.reshape(40, -1)], 1)
        (directory / name).write_bytes(records.tobytes())


# -- ResMLP -------------------------------------------------------------------------------

SMALL = dict(epochs=6, hidden=64, blocks=1, warmup_epochs=1, seed=0)


@pytest.fixture(scope="module")
def trained():
    config = resmlp.Config(**SMALL)
    start = time.perf_counter()
    result = resmlp.train(config, progress=Progress(config.epochs, disable=True))
    result["seconds"] = time.perf_counter() - start
    result["config"] = config
    return result


def test_resmlp_digits_reaches_90_percent_within_60s(trained):
    assert trained["seconds"] < 60, f"training took {trained['seconds']:.1f} s"
    assert trained["test"]["accuracy"] >= 0.90, trained["test"]
    history = trained["history"]
    assert history["epoch"] == list(range(1, SMALL["epochs"] + 1))
    assert history["test_accuracy"][-1] == trained["test"]["accuracy"]
    assert history["train_loss"][-1] < history["train_loss"][0] / 3
    # warm-up then cosine decay: the learning rate peaks after the first epoch
    lrs = history["lr"]
    assert lrs.index(max(lrs)) <= 1 and lrs[-1] < lrs[1] / 10


def test_resmlp_evaluates_on_the_held_out_split(trained):
    x_train, _, x_test, _ = resmlp.load_data("digits", seed=SMALL["seed"])
    assert len(trained["test_loader"].dataset) == len(x_test) == 359
    train_rows = {row.tobytes() for row in x_train}
    assert not any(row.tobytes() in train_rows for row in x_test)


def test_checkpoint_reload_gives_identical_evaluation(trained, tmp_path):
    path = tmp_path / "ckpt.safetensors"
    resmlp.save_checkpoint(path, trained["model"], trained["opt_state"], trained["config"],
                           trained["test"])
    model, opt_state, metadata = resmlp.load_checkpoint(path, trained["in_features"])
    assert type(model) is type(trained["model"])
    saved = fgrad.tree.leaves((trained["model"], trained["opt_state"]))
    loaded = fgrad.tree.leaves((model, opt_state))
    assert len(saved) == len(loaded)
    for a, b in zip(saved, loaded):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert metadata["config"]["hidden"] == SMALL["hidden"]
    assert metadata["test"] == trained["test"]
    again = evaluate(resmlp.logits_of, model, trained["test_loader"])
    assert again == trained["test"]


def test_resmlp_script_quick(tmp_path):
    out = run_script("resmlp", "--quick", "--no-progress", "--out", str(tmp_path))
    accuracy = float(re.search(r"test accuracy ([\d.]+)%", out).group(1))
    reloaded = float(re.search(r"reloaded the checkpoint: test accuracy ([\d.]+)%", out).group(1))
    assert reloaded == accuracy
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "history.json").read_text())["epoch"] == [1, 2]
    assert (tmp_path / "checkpoint.safetensors").stat().st_size > 0


@pytest.mark.parametrize("dataset, writer", [("mnist", tiny_mnist), ("cifar10", tiny_cifar)])
def test_resmlp_reads_data_directories(tmp_path, capsys, dataset, writer):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    writer(data_dir)
    test = resmlp.main(["--data", str(data_dir), "--dataset", dataset, "--quick",
                        "--no-progress", "--batch-size", "32", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert f"ResMLP on {dataset}" in out
    held_out = 100 if dataset == "mnist" else 40
    assert f"on {held_out} held-out images" in out
    assert 0.0 <= test["accuracy"] <= 1.0


def test_resmlp_names_the_missing_data_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        resmlp.load_data("mnist", str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="--data DIR"):
        resmlp.load_data("cifar10", None)


# -- CNN, LSTM, transformer ----------------------------------------------------------------

def _check_run_files(out_dir, epochs):
    assert (out_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    history = json.loads((out_dir / "history.json").read_text())
    assert (out_dir / "checkpoint.safetensors").stat().st_size > 0
    return history


@pytest.mark.parametrize("name", ["cnn", "lstm"])
def test_image_sequence_scripts_quick(tmp_path, name):
    out = run_script(name, "--quick", "--no-progress", "--out", str(tmp_path))
    accuracy = float(re.search(r"test accuracy ([\d.]+)%", out).group(1))
    reloaded = float(re.search(r"reloaded the checkpoint: test accuracy ([\d.]+)%", out).group(1))
    assert reloaded == accuracy
    assert _check_run_files(tmp_path, 2)["epoch"] == [1, 2]


def test_cnn_and_lstm_read_mnist_sized_images(tmp_path, capsys):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    tiny_mnist(data_dir)          # 28x28: the CNN's pools give 7x7, the LSTM reads 28 rows
    for module in (cnn, lstm):
        test = module.main(["--data", str(data_dir), "--quick", "--no-progress",
                            "--batch-size", "32", "--out", str(tmp_path / module.__name__)])
        assert "on 100 held-out images" in capsys.readouterr().out
        assert 0.0 <= test["accuracy"] <= 1.0
    model = cnn.model_for(cnn.Config(channels=4), (1, 28, 28), key=fgrad.random.key(0))
    assert model(np.zeros((2, 1, 28, 28), np.float32)).shape == (2, 10)


@pytest.mark.slow
@pytest.mark.parametrize("module, floor", [(cnn, 0.98), (lstm, 0.97)])
def test_default_runs_reach_their_stated_accuracy(module, floor):
    config = module.Config()
    result = cnn.train(config, progress=Progress(config.epochs, disable=True),
                       model_for=getattr(module, "model_for"))
    assert result["test"]["accuracy"] >= floor, result["test"]


def test_transformer_is_causal_and_samples():
    vocab = transformer.Vocabulary("abcdefgh ")
    model = transformer.CharTransformer(len(vocab), 12, 16, 2, 1, key=fgrad.random.key(0))
    model = transformer.fnn.eval_mode(model)
    ids = vocab.encode("abc defgh ab")
    changed = ids.copy()
    changed[7:] = vocab.encode("hhhhh")
    a, b = np.asarray(model(ids[None])), np.asarray(model(changed[None]))
    np.testing.assert_allclose(a[0, :7], b[0, :7], rtol=1e-5, atol=1e-6)  # the past only
    assert not np.allclose(a[0, 7:], b[0, 7:])
    text = transformer.sample(model, vocab, "ab", 15, 12, np.random.default_rng(0))
    assert text.startswith("ab") and len(text) == 17 and set(text) <= set(vocab.chars)


def test_transformer_script_quick(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 60)
    val = transformer.main(["--text", str(text), "--quick", "--no-progress",
                            "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert out.count("sample:\n") == 2
    reloaded = float(re.search(r"reloaded the checkpoint: validation loss ([\d.]+)", out).group(1))
    assert reloaded == pytest.approx(val, abs=1e-4)
    history = _check_run_files(tmp_path / "run", 2)
    assert history["step"] == [10, 20]
    assert history["val_loss"][-1] < np.log(len(set(text.read_text())))   # beats uniform


def test_transformer_default_text_ships_with_python():
    text = transformer.load_text()
    assert len(text) > 300_000 and "if_stmt" in text


# -- the two-layer homework ---------------------------------------------------------------

def test_two_layer_script_quick():
    out = run_script("two_layer", "--quick")
    error = float(re.search(r"largest relative error ([\d.e+-]+)", out).group(1))
    assert error < 1e-6
    assert len(re.findall(r"^epoch +\d+ ", out, re.M)) == 3
    assert float(re.search(r"final test accuracy ([\d.]+)%", out).group(1)) >= 80.0


def test_two_layer_gradient_matches_finite_differences():
    x, y, _, _ = two_layer.load_data()
    assert two_layer.gradient_check(x[:8], y[:8], reg=0.5, seed=3) < 1e-6


def test_two_layer_reads_mnist(tmp_path, capsys):
    tiny_mnist(tmp_path)
    rows = two_layer.main(["--data", str(tmp_path), "--epochs", "8", "--hidden", "16"])
    assert "784 -> 16 -> 10" in capsys.readouterr().out
    assert rows[-1][3] >= 0.9     # the striped classes are easy to tell apart


# -- per-example gradients ----------------------------------------------------------------

def test_per_example_grads_match_a_loop_and_the_dp_step():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 6)).astype(np.float32)
    ys = rng.integers(0, 3, 5).astype(np.int32)
    params = per_example.init_params([6, 4, 3], seed=1)
    mapped = per_example.per_example_grads(params, xs, ys)
    looped = per_example.loop_grads(params, xs, ys)
    for a, b in zip(fgrad.tree.leaves(mapped), fgrad.tree.leaves(looped)):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)
    flat = np.concatenate([np.asarray(g).reshape(5, -1) for g in fgrad.tree.leaves(mapped)], 1)
    norms = np.linalg.norm(flat, axis=1)
    np.testing.assert_allclose(np.asarray(per_example.tree_norms(mapped)), norms, rtol=1e-5)

    clip = float(np.median(norms))   # some examples clipped, some not
    new, _ = per_example.dp_sgd_step(params, xs, ys, fgrad.random.key(0), 0.1, clip, 0.0)
    scale = np.minimum(1.0, clip / norms)
    for p, g, q in zip(fgrad.tree.leaves(params), fgrad.tree.leaves(mapped),
                       fgrad.tree.leaves(new)):
        g = np.asarray(g)
        expected = p - 0.1 * np.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0)
        np.testing.assert_allclose(np.asarray(q), expected, rtol=1e-5, atol=1e-6)


def test_per_example_grads_script_quick():
    out = run_script("per_example_grads", "--quick")
    assert float(re.search(r"largest difference ([\d.e+-]+)", out).group(1)) < 1e-5
    assert len(re.findall(r"^epoch +\d+: test accuracy", out, re.M)) == 2


# -- the tour -----------------------------------------------------------------------------

def test_tour_script():
    out = run_script("tour")
    assert "f(2, 5)  = 11.652" in out and "df/dx1   = 5.500" in out
    assert "grad(f)(2, 5)          = (5.5, 1.716)" in out
    hvps = dict(re.findall(r"^(forward over reverse H v|reverse over reverse H v|"
                           r"fgrad\.hessian\(f\) @ v|analytic H v) += (\(.*\))$", out, re.M))
    assert len(hvps) == 4 and len(set(hvps.values())) == 1, hvps
    assert out.count("{ lambda") == 3
