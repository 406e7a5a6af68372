"""The Python Array API standard (2023.12) over fgrad.numpy; the public namespace
is fgrad.array_api (what `x.__array_namespace__()` returns)."""
