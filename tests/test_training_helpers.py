"""fgrad_nn.training: progress bars, History, plot_curves and the jitted evaluate."""
import io
import json

import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad_nn.data import ArrayDataset, DataLoader, OneHot
from fgrad_nn.training import History, Progress, evaluate, plot_curves


# -- evaluate ----------------------------------------------------------------------------

def linear(params, x):
    return x @ params["w"] + params["b"]


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(37, 6)).astype(np.float32)
    y = rng.integers(0, 4, 37)
    params = {"w": rng.normal(size=(6, 4)).astype(np.float32),
              "b": rng.normal(size=4).astype(np.float32)}
    return x, y, params


def numpy_metrics(x, y, params):
    logits = (x.astype(np.float64) @ params["w"] + params["b"])
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean(), (logits.argmax(axis=1) == y).mean()


@pytest.mark.parametrize("batch_size", [37, 8])
def test_evaluate_matches_numpy(problem, batch_size):
    x, y, params = problem
    result = evaluate(linear, params, DataLoader(ArrayDataset(x, y), batch_size))
    loss, accuracy = numpy_metrics(x, y, params)
    assert result["loss"] == pytest.approx(loss, rel=1e-5)
    assert result["accuracy"] == accuracy
    assert 0 < accuracy < 1      # a test that could tell right from wrong counts


def test_evaluate_one_hot_labels_and_custom_loss(problem):
    x, y, params = problem
    loader = DataLoader(ArrayDataset(x, y), 10, transforms=[OneHot(4)])
    loss, accuracy = numpy_metrics(x, y, params)
    assert evaluate(linear, params, loader)["loss"] == pytest.approx(loss, rel=1e-5)

    def squared_error_mean(logits, targets):       # a batch mean, not per example
        return fnp.mean(fnp.sum((logits - targets) ** 2, axis=-1))

    result = evaluate(linear, params, loader, loss_fn=squared_error_mean)
    logits = x.astype(np.float64) @ params["w"] + params["b"]
    expected = ((logits - np.eye(4)[y]) ** 2).sum(axis=1).mean()
    assert result["loss"] == pytest.approx(expected, rel=1e-5)
    assert result["accuracy"] == accuracy


def test_evaluate_is_jitted_and_reuses_the_program(problem):
    x, y, params = problem
    traces = []

    def counted(p, xb):
        traces.append(xb.shape)
        return linear(p, xb)

    loader = DataLoader(ArrayDataset(x, y), 8)        # batches of 8 and a last one of 5
    evaluate(counted, params, loader)
    evaluate(counted, params, loader)
    assert traces == [(8, 6), (5, 6)]


def test_evaluate_rejects_bad_loaders(problem):
    x, y, params = problem
    with pytest.raises(ValueError, match=r"\(x, y\) batches"):
        evaluate(linear, params, DataLoader(ArrayDataset(x), 8))
    with pytest.raises(ValueError, match="no batches"):
        evaluate(linear, params, [])


# -- progress ----------------------------------------------------------------------------

def run_progress(**kwargs):
    loader = DataLoader(ArrayDataset(np.arange(6)), 2)
    progress = Progress(2, **kwargs)
    means = []
    for epoch in progress.epochs():
        for (xb,) in progress.batches(loader, desc=f"epoch {epoch}"):
            progress.log(loss=fnp.asarray(float(xb.sum())), accuracy=0.5)
        means.append(progress.means())
        progress.summary(**means[-1])
    return means


def test_progress_shows_metrics_and_means():
    out = io.StringIO()
    means = run_progress(disable=False, file=out)
    assert means == [{"loss": 5.0, "accuracy": 0.5}] * 2     # (1 + 5 + 9) / 3
    text = out.getvalue()
    assert "epochs" in text and "loss=5" in text and "accuracy=0.5" in text


def test_progress_disabled_is_silent(capsys):
    out = io.StringIO()
    run_progress(disable=True, file=out)
    run_progress()           # default: only on a terminal, and pytest's stderr is not one
    assert out.getvalue() == ""
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# -- History -----------------------------------------------------------------------------

def test_history_columns_json_round_trip():
    history = History()
    history.append(epoch=0, loss=np.float32(0.5), accuracy=fnp.asarray(0.25))
    history.append(epoch=1, loss=0.25, test_accuracy=0.75)
    assert history.keys() == ["epoch", "loss", "accuracy", "test_accuracy"]
    assert history["loss"] == [0.5, 0.25] and history["accuracy"] == [0.25, None]
    assert history.as_dict()["test_accuracy"] == [None, 0.75]
    assert history.last() == {"epoch": 1, "loss": 0.25, "test_accuracy": 0.75}
    assert json.loads(history.to_json())["epoch"] == [0, 1]
    assert History.from_json(history.to_json()).rows == history.rows
    with pytest.raises(KeyError, match="no metric 'lr'"):
        history["lr"]
    with pytest.raises(ValueError, match="'loss' must be a scalar.*\\(3,\\)"):
        history.append(loss=np.zeros(3))


def test_history_to_json_file(tmp_path):
    history = History([{"step": 1, "loss": 2.0}])
    history.to_json(tmp_path / "h.json")
    assert json.loads((tmp_path / "h.json").read_text()) == {"step": [1], "loss": [2.0]}


def test_history_to_json_keeps_mode_and_follows_links(tmp_path):
    import os
    target, link = tmp_path / "h.json", tmp_path / "latest.json"
    History([{"loss": 1.0}]).to_json(target)
    os.chmod(target, 0o600)
    link.symlink_to(target)
    History([{"loss": 2.0}]).to_json(link)
    assert link.is_symlink() and (target.stat().st_mode & 0o777) == 0o600
    assert json.loads(target.read_text()) == {"loss": [2.0]}
    assert sorted(os.listdir(tmp_path)) == ["h.json", "latest.json"]


# -- plot_curves -------------------------------------------------------------------------

def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_curves_writes_png(tmp_path):
    history = History()
    for epoch in range(4):
        history.append(epoch=epoch, loss=1 / (epoch + 1), test_loss=1.2 / (epoch + 1),
                       accuracy=0.5 + epoch / 10, test_accuracy=0.45 + epoch / 10)
    path = plot_curves(history, tmp_path / "out" / "curves.png", title="digits")
    width, height = png_size(path)
    assert width > height > 100


def test_plot_curves_failing_midway_keeps_the_old_png(tmp_path, monkeypatch):
    import os
    from matplotlib.figure import Figure
    path = plot_curves({"loss": [3.0, 2.0]}, tmp_path / "c.png")
    before = path.read_bytes()

    def half_then_fail(self, file, **kwargs):
        if isinstance(file, (str, os.PathLike)):   # a write in place
            file = open(file, "wb")
        file.write(before[:100])
        file.flush()
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        plot_curves({"loss": [1.0]}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.png"]


def test_plot_curves_loss_only_and_bad_input(tmp_path):
    width, _ = png_size(plot_curves({"loss": [3.0, 2.0, 1.0]}, tmp_path / "a.png"))
    wide, _ = png_size(plot_curves({"loss": [1.0], "accuracy": [0.5]}, tmp_path / "b.png"))
    assert wide > width        # one panel against two
    with pytest.raises(ValueError, match="no metric named like 'loss'"):
        plot_curves({"lr": [0.1]}, tmp_path / "c.png")
