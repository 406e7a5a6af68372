"""The homework: a two-layer ReLU network with a softmax loss, trained by plain SGD.

    python examples/two_layer.py                  # scikit-learn's bundled digits
    python examples/two_layer.py --data ~/mnist   # MNIST IDX files in ~/mnist

    scores = relu(x W1 + b1) W2 + b2
    loss   = mean over the batch of -log softmax(scores)[label] + reg/2 (|W1|^2 + |W2|^2)

Everything about the network is written here with fgrad.numpy, and its
gradient comes from fgrad.grad alone: no layers, optimizers or loss library.
(Only the MNIST file reader is borrowed from fgrad_nn.data.)
"""
import argparse
import sys
from pathlib import Path

import numpy as np

try:
    import fgrad
except ImportError:  # a source checkout run without `make install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fgrad
import fgrad.numpy as fnp


def load_data(data_dir=None, seed=0):
    """(x_train, y_train, x_test, y_test): float32 rows scaled to [0, 1], int labels.

    Without data_dir: the 1797 bundled 8x8 digits, 360 of them held out at random.
    With data_dir: MNIST's 60,000 training and 10,000 test images (28x28).
    """
    if data_dir is None:
        from sklearn.datasets import load_digits
        digits = load_digits()
        x = digits.data.astype(np.float32) / 16.0
        order = np.random.default_rng(seed).permutation(len(x))
        test, train = order[:360], order[360:]
        return x[train], digits.target[train], x[test], digits.target[test]
    from fgrad_nn.data import load_mnist
    x_train, y_train = load_mnist(data_dir, "train")
    x_test, y_test = load_mnist(data_dir, "test")
    rows = lambda images: images.reshape(len(images), -1).astype(np.float32) / 255.0  # noqa: E731
    return rows(x_train), y_train, rows(x_test), y_test


def init_params(n_in, n_hidden, n_out, seed):
    """He-scaled Gaussian weights (for ReLU), zero biases."""
    rng = np.random.default_rng(seed)

    def weights(m, n):
        return (rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32)

    return {"W1": weights(n_in, n_hidden), "b1": np.zeros(n_hidden, np.float32),
            "W2": weights(n_hidden, n_out), "b2": np.zeros(n_out, np.float32)}


def scores(params, x):
    hidden = fnp.maximum(x @ params["W1"] + params["b1"], 0.0)
    return hidden @ params["W2"] + params["b2"]


def softmax_loss(params, x, y, reg):
    """Mean softmax cross-entropy (log-sum-exp shifted by the row maximum, so it
    never overflows) plus L2 regularisation of the weights."""
    s = scores(params, x)
    shifted = s - fnp.max(s, axis=1, keepdims=True)
    log_probs = shifted - fnp.log(fnp.sum(fnp.exp(shifted), axis=1, keepdims=True))
    data_loss = -fnp.mean(log_probs[fnp.arange(x.shape[0]), y])
    return data_loss + 0.5 * reg * (fnp.sum(params["W1"] ** 2) + fnp.sum(params["W2"] ** 2))


def accuracy(params, x, y):
    return float(np.mean(np.argmax(np.asarray(scores(params, x)), axis=1) == y))


loss_grad = fgrad.value_and_grad(softmax_loss)


def gradient_check(x, y, reg, seed=0, probes=10, h=1e-5):
    """Compare fgrad.grad with centred finite differences at `probes` random
    coordinates of each parameter, in float64. Returns the largest relative error."""
    params = {k: v.astype(np.float64) for k, v in init_params(x.shape[1], 16, 10, seed).items()}
    x = x.astype(np.float64)
    grads = fgrad.grad(softmax_loss)(params, x, y, reg)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for name, value in params.items():
        for index in zip(*(rng.integers(0, n, probes) for n in value.shape)):
            bumped = {k: v.copy() for k, v in params.items()}
            bumped[name][index] = value[index] + h
            plus = float(softmax_loss(bumped, x, y, reg))
            bumped[name][index] = value[index] - h
            minus = float(softmax_loss(bumped, x, y, reg))
            numeric, analytic = (plus - minus) / (2 * h), float(grads[name][index])
            worst = max(worst, abs(numeric - analytic) / max(1e-8, abs(numeric) + abs(analytic)))
    return worst


def sgd_step(params, x, y, lr, reg):
    """One step of plain SGD: p <- p - lr * dL/dp for every parameter."""
    loss, grads = loss_grad(params, x, y, reg)
    return {name: params[name] - lr * grads[name] for name in params}, loss


def train(x_train, y_train, x_test, y_test, *, hidden=64, epochs=20, batch_size=32, lr=0.1,
          reg=1e-4, seed=0, log=print):
    """SGD over shuffled mini-batches; returns the parameters and per-epoch
    (epoch, mean train loss, train accuracy, test accuracy) rows."""
    params = init_params(x_train.shape[1], hidden, 10, seed)
    rng = np.random.default_rng(seed + 1)
    rows = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        losses = []
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            params, loss = sgd_step(params, x_train[batch], y_train[batch], lr, reg)
            losses.append(float(loss))
        rows.append((epoch, float(np.mean(losses)), accuracy(params, x_train, y_train),
                     accuracy(params, x_test, y_test)))
        log(f"epoch {epoch:3d}   loss {rows[-1][1]:.4f}   train accuracy {rows[-1][2]:7.2%}"
            f"   test accuracy {rows[-1][3]:7.2%}")
    return params, rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", metavar="DIR", default=None,
                   help="directory holding MNIST's IDX files (default: the bundled digits)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--reg", type=float, default=1e-4, help="L2 regularisation strength")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="3 epochs (a smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs = 3
    x_train, y_train, x_test, y_test = load_data(args.data, args.seed)
    error = gradient_check(x_train[:20], y_train[:20], reg=0.1)
    print(f"gradient check (fgrad.grad vs finite differences, float64): largest relative "
          f"error {error:.1e}")
    if error > 1e-6:
        raise SystemExit("the gradient check failed")
    print(f"two-layer ReLU net {x_train.shape[1]} -> {args.hidden} -> 10, plain SGD "
          f"(lr {args.lr}, batch {args.batch_size}) on {len(x_train)} training images")
    _, rows = train(x_train, y_train, x_test, y_test, hidden=args.hidden, epochs=args.epochs,
                    batch_size=args.batch_size, lr=args.lr, reg=args.reg, seed=args.seed)
    print(f"final test accuracy {rows[-1][3]:.2%} on {len(x_test)} held-out images")
    return rows


if __name__ == "__main__":
    main()
