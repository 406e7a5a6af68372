"""MPI collectives as fgrad primitives (`fgrad.distributed`)."""
