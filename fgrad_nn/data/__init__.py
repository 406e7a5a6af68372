"""fgrad_nn.data: datasets, a seeded DataLoader, batch transforms, and readers
for MNIST/Fashion-MNIST (IDX), CIFAR-10 (binary) and the bundled digits."""
from . import transforms  # noqa: F401
from ._files import DataFileError  # noqa: F401
from .cifar import CIFAR10_CLASSES, load_cifar10  # noqa: F401
from .dataset import (ArrayDataset, Dataset, Subset, gather, random_split,  # noqa: F401
                      train_test_split)
from .digits import load_digits, load_digits_split  # noqa: F401
from .idx import FASHION_MNIST_CLASSES, MNIST_CLASSES, load_mnist, read_idx  # noqa: F401
from .loader import DataLoader  # noqa: F401
from .transforms import (Flatten, Normalize, OneHot, RandomCrop,  # noqa: F401
                         RandomHorizontalFlip)

__all__ = ["ArrayDataset", "CIFAR10_CLASSES", "DataFileError", "DataLoader", "Dataset",
           "FASHION_MNIST_CLASSES", "Flatten", "MNIST_CLASSES", "Normalize", "OneHot",
           "RandomCrop", "RandomHorizontalFlip", "Subset", "gather", "load_cifar10",
           "load_digits", "load_digits_split", "load_mnist", "random_split", "read_idx",
           "train_test_split", "transforms"]
