"""CPU backend: LLVM IR compiled with llvmlite (MCJIT) for the host CPU.

`engine` owns the LLVM side (target machine, optimisation pipeline, JIT and
the on-disk object cache); `mathlib` emits vectorisable transcendental
functions into an llvmlite `ir.Module`.
"""
