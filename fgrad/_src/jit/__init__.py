"""jit: tracing to a program once per cache key, compiling it, and running it."""
