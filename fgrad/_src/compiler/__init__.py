"""The compiler: backend-independent jaxpr passes (simplify), then fusion and backends."""
