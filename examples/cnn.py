"""A small convolutional network classifying images, trained end to end.

    python examples/cnn.py                         # scikit-learn's bundled digits (offline)
    python examples/cnn.py --data ~/mnist          # MNIST IDX files in ~/mnist
    python examples/cnn.py --data ~/cifar --dataset cifar10

Model: [Conv2d(3x3, padding 1) -> ReLU -> MaxPool2d(2)] x 2 -> Flatten -> Linear.
The padding keeps each convolution's output the size of its input, so the digits'
8x8 images become 4x4 after the first pool and 2x2 after the second (MNIST's 28x28:
14x14 then 7x7; CIFAR-10's 32x32: 16x16 then 8x8). Training, evaluation, the
progress bar and the files written under --out (default runs/cnn/: curves.png,
history.json, checkpoint.safetensors) are as in examples/resmlp.py, whose data
loading, optimizer (AdamW, warm-up + cosine) and jitted train step this script
reuses. The defaults reach 98.3% test accuracy on the digits (at least 98%, checked
by a slow test).
"""
import argparse
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # resmlp, next to this file

# (importing resmlp also puts a source checkout's fgrad on the path)
from resmlp import (DATASETS, load_data, logits_of, make_loaders,  # noqa: E402
                    make_optimizer, make_train_step, print_history)

import fgrad  # noqa: E402
import fgrad_nn as fnn  # noqa: E402
from fgrad_nn import checkpoint, optim  # noqa: E402
from fgrad_nn.training import History, Progress, evaluate, plot_curves  # noqa: E402


@dataclass
class Config:
    """Every setting of a run (the command line's flags)."""
    dataset: str = "digits"
    data_dir: str = None
    epochs: int = 20
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-4
    warmup_epochs: int = 1
    channels: int = 32         # the first convolution's; the second has twice as many
    seed: int = 0
    out: str = "runs/cnn"
    limit: int = None          # use only the first `limit` training examples


def build_model(in_channels, image_size, num_classes, channels, *, key):
    """conv-relu-pool x 2, then a Linear: (N, C, H, W) images -> (N, classes) logits."""
    k1, k2, k3 = fgrad.random.split(key, 3)
    height, width = image_size
    flat = 2 * channels * (height // 4) * (width // 4)
    return fnn.Sequential(
        fnn.Conv2d(in_channels, channels, 3, padding=1, key=k1), fnn.ReLU(), fnn.MaxPool2d(2),
        fnn.Conv2d(channels, 2 * channels, 3, padding=1, key=k2), fnn.ReLU(), fnn.MaxPool2d(2),
        fnn.Flatten(),
        fnn.Linear(flat, num_classes, key=k3),
    )


def model_for(config, input_shape, *, key):
    """The CNN `config` describes for images of `input_shape` (C, H, W)."""
    return build_model(input_shape[0], input_shape[1:], 10, config.channels, key=key)


def train(config, *, progress=None, model_for=model_for):
    """Train the model that model_for(config, input_shape, key=) builds (this CNN by
    default; examples/lstm.py passes its own). Returns a dict with the trained
    `model`, `opt_state`, `history`, `test` metrics, the `test_loader` and the
    `input_shape`."""
    x_train, y_train, x_test, y_test = load_data(config.dataset, config.data_dir, config.seed)
    if config.limit:
        x_train, y_train = x_train[:config.limit], y_train[:config.limit]
    train_loader, test_loader = make_loaders(x_train, y_train, x_test, y_test,
                                             config.batch_size, config.seed,
                                             augment=config.dataset == "cifar10")
    key = fgrad.random.key(config.seed)
    init_key, key = fgrad.random.split(key)
    input_shape = tuple(int(n) for n in x_train.shape[1:])
    model = model_for(config, input_shape, key=init_key)
    steps_per_epoch = len(train_loader)
    optimizer = make_optimizer(config.lr, config.weight_decay,
                               config.warmup_epochs * steps_per_epoch,
                               config.epochs * steps_per_epoch)
    opt_state = optimizer.init(model)
    train_step = make_train_step(optimizer)

    progress = progress or Progress(config.epochs)
    history = History()
    for epoch in progress.epochs():
        for x, y in progress.batches(train_loader, desc=f"epoch {epoch + 1}"):
            step_key, key = fgrad.random.split(key)
            model, opt_state, loss, accuracy = train_step(model, opt_state, x, y, step_key)
            progress.log(loss=loss, accuracy=accuracy)
        test = evaluate(logits_of, model, test_loader)
        means = progress.means()
        history.append(epoch=epoch + 1, train_loss=means["loss"],
                       train_accuracy=means["accuracy"], test_loss=test["loss"],
                       test_accuracy=test["accuracy"],
                       lr=float(optim.current_learning_rate(opt_state)))
        progress.summary(train_loss=means["loss"], test_acc=test["accuracy"])
    return {"model": model, "opt_state": opt_state, "history": history, "test": test,
            "test_loader": test_loader, "input_shape": input_shape}


def save_checkpoint(path, model, opt_state, config, test, input_shape):
    """Parameters and optimizer state in one safetensors file; the settings, the
    input shape and the test metrics in its metadata."""
    checkpoint.save(path, {"model": model, "opt_state": opt_state},
                    metadata={"config": asdict(config), "test": test,
                              "input_shape": list(input_shape)})


def load_checkpoint(path, *, config_class=Config, model_for=model_for):
    """(model, opt_state, metadata) from a checkpoint written by `save_checkpoint`
    (a freshly built model of the saved shape is the template `like=` checks)."""
    metadata = checkpoint.load_metadata(path)
    config = config_class(**metadata["config"])
    template = model_for(config, tuple(metadata["input_shape"]), key=fgrad.random.key(0))
    opt_state = make_optimizer(config.lr, config.weight_decay, 1, 2).init(template)
    state = checkpoint.load(path, like={"model": template, "opt_state": opt_state})
    return state["model"], state["opt_state"], metadata


def image_parser(defaults, description):
    """The flags the image examples share (data, training schedule, output, bars)."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", choices=DATASETS, default=None,
                   help="data set (default: digits, or mnist when --data is given)")
    p.add_argument("--data", dest="data_dir", default=None, metavar="DIR",
                   help="directory holding the MNIST / Fashion-MNIST IDX files or the "
                        "CIFAR-10 binary batches")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    p.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    p.add_argument("--warmup-epochs", type=int, default=defaults.warmup_epochs)
    p.add_argument("--seed", type=int, default=defaults.seed,
                   help="seeds the initialisation, shuffling and the digits split")
    p.add_argument("--limit", type=int, default=None,
                   help="train on the first LIMIT training examples only")
    p.add_argument("--out", default=defaults.out,
                   help="directory for the checkpoint, the curves PNG and the metrics")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 2 epochs of a small model on at most 512 examples")
    bars = p.add_mutually_exclusive_group()
    bars.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress bars even when stderr is not a terminal")
    bars.add_argument("--no-progress", dest="progress", action="store_false",
                      help="hide the progress bars (default: shown on a terminal)")
    return p


def check_image_args(p, args, positive):
    """Fill in the data set, apply --quick's common part and check the flags
    (`positive`: the model's flags that must be at least 1)."""
    if args.dataset is None:
        args.dataset = "mnist" if args.data_dir else "digits"
    if args.dataset != "digits" and args.data_dir is None:
        p.error(f"--dataset {args.dataset} reads its files from a directory: pass --data DIR")
    if args.quick:
        args.epochs, args.warmup_epochs = 2, 1
        args.limit = args.limit or 512
    for name in ("epochs", "batch_size") + tuple(positive):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.warmup_epochs < args.epochs:
        p.error(f"--warmup-epochs ({args.warmup_epochs}) must lie in [0, --epochs)")
    return args


def parse_args(argv=None):
    p = image_parser(Config(), __doc__.split("\n\n")[0])
    p.add_argument("--channels", type=int, default=Config.channels,
                   help="the first convolution's output channels (the second: twice)")
    args = p.parse_args(argv)
    if args.quick:
        args.channels = 8
    return check_image_args(p, args, ("channels",))


def main(argv=None):
    args = parse_args(argv)
    config = Config(**{k: v for k, v in vars(args).items()
                       if k in Config.__dataclass_fields__})
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"CNN on {config.dataset}: conv({config.channels})-relu-pool, "
          f"conv({2 * config.channels})-relu-pool, linear; {config.epochs} epochs of batch "
          f"{config.batch_size}, AdamW with peak lr {config.lr} (warm-up + cosine)")
    progress = Progress(config.epochs,
                        disable=None if args.progress is None else not args.progress)
    return train_save_and_reload(config, out, progress, f"CNN on {config.dataset}")


def train_save_and_reload(config, out, progress, title, *, model_for=model_for):
    """Train, report, save the curves, history and checkpoint under `out`, reload the
    checkpoint and check that the reloaded model scores exactly the same."""
    start = time.perf_counter()
    result = train(config, progress=progress, model_for=model_for)
    seconds = time.perf_counter() - start
    history, test = result["history"], result["test"]
    print_history(history, every=max(1, config.epochs // 6))
    n_test = len(result["test_loader"].dataset)
    print(f"trained in {seconds:.1f} s; test accuracy {test['accuracy']:.2%} "
          f"(loss {test['loss']:.4f}) on {n_test} held-out images")

    curves = plot_curves(history, out / "curves.png", title=title)
    history.to_json(out / "history.json")
    path = out / "checkpoint.safetensors"
    save_checkpoint(path, result["model"], result["opt_state"], config, test,
                    result["input_shape"])
    print(f"saved {path}, {curves} and {out / 'history.json'}")
    model, _, _ = load_checkpoint(path, config_class=type(config), model_for=model_for)
    reloaded = evaluate(logits_of, model, result["test_loader"])
    print(f"reloaded the checkpoint: test accuracy {reloaded['accuracy']:.2%} "
          f"(loss {reloaded['loss']:.4f})")
    if reloaded != test:
        raise SystemExit(f"the reloaded model scores {reloaded}, the trained one {test}: "
                         f"the checkpoint did not round-trip")
    return test


if __name__ == "__main__":
    main()
