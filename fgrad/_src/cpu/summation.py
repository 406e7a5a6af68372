"""Accurate float sums in native loop nests: terms summed in blocks, the block
sums added pairwise.

One running sum of n float terms has an error bound of n ulps of the sum of
their magnitudes, and a vectorised one (with, say, 64 partial sums) stops
growing once each partial sum is 2^24 times its terms: 2^31 float32 ones sum
to 2^30. Instead, a fused float reduce_sum (`fused`) adds the terms of each
output element in blocks and pushes each block sum onto a binary counter:
level l holds the sum of 2^l blocks, and pushing block k merges the levels
that k's trailing one bits name, so that block sums meet as in a balanced
tree. The error bound is then about (terms per block and partial sum) +
log2(blocks) ulps, of the same kind as NumPy's pairwise sum along an inner
axis (128-term blocks in 8 accumulators, then halving; along outer axes
NumPy adds one row after another), and sums of integers below 2^24 (2^53)
are exact.

- `PairwiseSum`: the innermost loops are reduced. A block is about `BLOCK`
  consecutive terms, added in a loop that LLVM vectorises with several
  partial sums (its add alone carries `reassoc`); the counter's levels are a
  small array on the stack.
- `PairwiseRows`: the innermost loops are kept (a sum over outer axes). Each
  row adds its terms to a row of output elements, so a block is a few rows
  (`ROW_TERMS` terms per element) added into a scratch row, and the counter's
  levels are scratch rows (at most `SCRATCH_BYTES` in all).

Either way the loops over the terms stay plain vectorised loops over memory,
so sums still run at memory bandwidth. The bits are not NumPy's (the blocks
differ), so jit and eager sums may differ in the last places, within those
bounds; both start from +0.0, so a sum of -0.0s is +0.0 in both.

Products need none of this: a product's relative error is about n ulps in
any order.
"""
import math

from . import loops

# Terms per block: a block is at least BLOCK terms, fewer only at the end
# (rows shorter than BLOCK fill a block together).
BLOCK = 1024

# Terms per element and block when the terms of an output element lie in
# different rows (a reduction over outer axes): each row adds its terms to
# every element of a block row, one after another, so blocks are short.
ROW_TERMS = 32


def worth_it(terms):
    """Whether a sum of `terms` terms per output element needs blocks (a single
    block is summed as one anyway)."""
    return terms > BLOCK


# Most scratch memory for the block rows of one PairwiseRows.
SCRATCH_BYTES = 64 << 20


def block_rows(rows, terms_per_row, row_bytes):
    """Rows per block of a PairwiseRows summing `rows` rows that each add
    `terms_per_row` terms to every element of a row of `row_bytes` bytes, or
    None when one running sum per element is as good (few terms) or blocks
    would need as many rows as there are (the scratch rows, at most
    SCRATCH_BYTES, limit the counter's depth)."""
    if rows < 2 or rows * terms_per_row <= ROW_TERMS:
        return None
    block = max(1, ROW_TERMS // terms_per_row)
    while block < rows and (_depth(rows / block) + 1) * row_bytes > SCRATCH_BYTES:
        block *= 2
    return block if block < rows else None


def _depth(blocks):
    """Levels of a binary counter of up to `blocks` blocks."""
    return max(1, math.ceil(math.log2(blocks + 1)) + 1)


def _levels(ir, fn, b, bits, on_level, carry):
    """The walk over a binary counter's levels: for level = 0, 1, ... with
    bits >> level: carry: while its lowest bit is 1, on_level(level) (the
    levels a new block merges with); else while any bit is left, on_level(level)
    for each 1 bit (the occupied levels). Returns the level where it stopped."""
    i64 = ir.IntType(64)
    one, zero = ir.Constant(i64, 1), ir.Constant(i64, 0)
    pre = b.block
    head = fn.append_basic_block("levels")
    step = fn.append_basic_block("level")
    done = fn.append_basic_block("levels_done")
    b.branch(head)
    b.position_at_end(head)
    level = b.phi(i64, name="level")
    left = b.phi(i64, name="bits")
    level.add_incoming(zero, pre)
    left.add_incoming(bits, pre)
    odd = b.icmp_unsigned("!=", b.and_(left, one), zero)
    b.cbranch(odd if carry else b.icmp_unsigned("!=", left, zero), step, done)
    b.position_at_end(step)
    if carry:
        on_level(level)
    else:
        with b.if_then(odd):
            on_level(level)
    level.add_incoming(b.add(level, one, flags=("nuw", "nsw")), b.block)
    left.add_incoming(b.lshr(left, one), b.block)
    b.branch(head)
    b.position_at_end(done)
    return level


class PairwiseSum:
    """One output element's blocked pairwise sum: its state in allocas made at
    builder `b` (which must be in fn's entry block; all but the stack become
    registers) and the IR that updates it, emitted at `b`. `terms`: the most
    terms one sum has (sizes the stack); `ty`: the float register type;
    `flags`: the in-block add's fast-math flags (`reassoc`, to vectorise)."""

    def __init__(self, ir, fn, b, ty, terms, flags):
        assert b.block is fn.entry_basic_block      # static allocas
        self.ir, self.fn, self.b, self.ty, self.flags = ir, fn, b, ty, flags
        self.i64 = ir.IntType(64)
        self.block = b.alloca(ty, name="block_sum")
        self.carried = b.alloca(ty, name="pair_sum")
        self.count = b.alloca(self.i64, name="block_terms")
        self.blocks = b.alloca(self.i64, name="blocks")
        self.stack = b.alloca(ty, ir.Constant(self.i64, _depth(terms / BLOCK)), name="pairs")

    def _const(self, v):
        return self.ir.Constant(self.i64, v)

    def start(self):
        """A new sum: no terms yet."""
        b = self.b
        b.store(self.ir.Constant(self.ty, -0.0), self.block)    # -0.0 + x == x exactly
        b.store(self._const(0), self.count)
        b.store(self._const(0), self.blocks)

    def add(self, x):
        """Add one term to the current block (in the vectorised loop)."""
        b = self.b
        b.store(b.fadd(b.load(self.block, typ=self.ty), x, flags=self.flags), self.block)

    def terms_added(self, n):
        """After a loop that added `n` (an i64) terms: when the block holds BLOCK
        or more, push its sum and start the next block."""
        b = self.b
        count = b.add(b.load(self.count, typ=self.i64), n, flags=("nuw", "nsw"))
        b.store(count, self.count)
        with b.if_then(b.icmp_unsigned(">=", count, self._const(BLOCK)), likely=False):
            self._push()
            b.store(self.ir.Constant(self.ty, -0.0), self.block)
            b.store(self._const(0), self.count)

    def _level(self, level):
        return self.b.gep(self.stack, [level], inbounds=True, source_etype=self.ty)

    def _merge(self, level):
        b = self.b
        b.store(b.fadd(b.load(self._level(level), typ=self.ty),
                       b.load(self.carried, typ=self.ty)), self.carried)

    def _push(self):
        """The block's sum merged with the levels block number k's trailing ones
        name (each holds as many blocks as all merged below it), stored at the
        level above them."""
        b = self.b
        k = b.load(self.blocks, typ=self.i64)
        b.store(b.add(k, self._const(1), flags=("nuw", "nsw")), self.blocks)
        b.store(b.load(self.block, typ=self.ty), self.carried)
        level = _levels(self.ir, self.fn, b, k, self._merge, carry=True)
        b.store(b.load(self.carried, typ=self.ty), self._level(level))

    def total(self):
        """The sum: the open block, then the occupied levels from the smallest up."""
        b = self.b
        b.store(b.load(self.block, typ=self.ty), self.carried)
        _levels(self.ir, self.fn, b, b.load(self.blocks, typ=self.i64), self._merge, carry=False)
        return b.load(self.carried, typ=self.ty)


class PairwiseRows:
    """Blocked pairwise sums of `width` output elements at once, whose terms come
    in `rows` rows of `width` elements (a reduction over outer axes: the inner
    loops walk the kept elements). Rows are added into an open block row in a
    malloc'd scratch buffer; every `block` rows (see `block_rows`) it is
    pushed onto a binary counter of rows, element by element, as PairwiseSum
    does with scalars. `span`: the elements [first, stop) of each row (i64
    values, first < stop) this call sums, when a thread sums only some of them
    (see fused._split_level), else all. The buffer is allocated at builder `b`
    (in fn's entry block) and freed by `release`."""

    def __init__(self, ir, module, fn, b, ty, rows, width, block, span=None):
        assert b.block is fn.entry_basic_block
        self.ir, self.fn, self.b, self.ty, self.width = ir, fn, b, ty, width
        self.span = span
        self.i64 = ir.IntType(64)
        self.block_rows = block
        ptr = ir.PointerType()
        self.free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])
        malloc = loops.declare(ir, module, "malloc", ptr, [self.i64])
        itemsize = 4 if isinstance(ty, ir.FloatType) else 8
        size = (_depth(rows / self.block_rows) + 1) * width * itemsize
        self.buffer = b.call(malloc, [self._const(size)])
        self.count = b.alloca(self.i64, name="block_rows")
        self.blocks = b.alloca(self.i64, name="row_blocks")

    def _const(self, v):
        return self.ir.Constant(self.i64, v)

    def at(self, j):
        """Pointer to element j (an i64) of the open block row (what the body
        adds to)."""
        return self.b.gep(self.buffer, [j], inbounds=True, source_etype=self.ty)

    def _row(self, level):
        """Pointer to element 0 of a level's row (after the open row)."""
        b = self.b
        at = b.mul(b.add(level, self._const(1)), self._const(self.width))
        return self.at(at)

    def _each(self, body):
        if self.span is None:
            loops.loop(self.ir, self.b, self.fn, 0, self.width, body, "col")
        else:
            loops.span(self.ir, self.b, self.fn, *self.span, body, "col")

    def start(self):
        """New sums: no rows yet."""
        b, zero = self.b, self.ir.Constant(self.ty, -0.0)   # -0.0 + x == x exactly
        b.store(self._const(0), self.count)
        b.store(self._const(0), self.blocks)
        self._each(lambda j: b.store(zero, self.at(j)))

    def _merge(self, level):
        """The open row += the level's row."""
        b, row = self.b, self._row(level)
        self._each(lambda j: b.store(
            b.fadd(b.load(b.gep(row, [j], inbounds=True, source_etype=self.ty), typ=self.ty),
                   b.load(self.at(j), typ=self.ty)), self.at(j)))

    def row_done(self):
        """After each row: every `block_rows` rows, push the open row."""
        b = self.b
        count = b.add(b.load(self.count, typ=self.i64), self._const(1), flags=("nuw", "nsw"))
        b.store(count, self.count)
        with b.if_then(b.icmp_unsigned(">=", count, self._const(self.block_rows)),
                       likely=False):
            b.store(self._const(0), self.count)
            self._push()

    def _push(self):
        """The open row merged with the levels block number k's trailing ones
        name, moved to the level above them (the open row starts afresh)."""
        b = self.b
        k = b.load(self.blocks, typ=self.i64)
        b.store(b.add(k, self._const(1), flags=("nuw", "nsw")), self.blocks)
        level = _levels(self.ir, self.fn, b, k, self._merge, carry=True)
        target, zero = self._row(level), self.ir.Constant(self.ty, -0.0)

        def move(j):
            b.store(b.load(self.at(j), typ=self.ty),
                    b.gep(target, [j], inbounds=True, source_etype=self.ty))
            b.store(zero, self.at(j))
        self._each(move)

    def total_into(self, out):
        """out[j] += the sum of element j (the open row, then the occupied levels
        from the smallest up)."""
        b = self.b
        _levels(self.ir, self.fn, b, b.load(self.blocks, typ=self.i64), self._merge, carry=False)

        def add(j):
            p = b.gep(out, [j], inbounds=True, source_etype=self.ty)
            b.store(b.fadd(b.load(p, typ=self.ty), b.load(self.at(j), typ=self.ty)), p)
        self._each(add)

    def release(self):
        """Free the scratch buffer (emit before the function returns)."""
        self.b.call(self.free, [self.buffer])
