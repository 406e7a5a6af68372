"""Optional packages, imported where a feature uses them.

`import fgrad_nn` needs only fgrad's own dependencies; the few features that
need more name the extra that installs it when it is missing.
"""
import importlib


class MissingExtraError(ImportError):
    """An optional package a feature needs is not installed."""


def require(module, feature, extra, package=None):
    """Import and return `module` for `feature`; a MissingExtraError naming the
    package (default: the module's top-level name) and `pip install 'fgrad[<extra>]'`
    when it cannot be imported."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = package or module.split(".")[0]
        raise MissingExtraError(
            f"{feature}: this needs {package}, which could not be imported ({e}).\n"
            f"  hint: pip install 'fgrad[{extra}]'") from e
