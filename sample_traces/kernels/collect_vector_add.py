"""C = A + B, one UB tile per AI core (TileLang 0.1.15), the example kernel of `tilescope collect`.

Written in the style that also runs on the CPU (target "c", tilelang-notes §2): a 1-D grid with no
`threads=`, a single dynamic shared (UB) allocation and `T.serial` loops. It therefore lowers for
Ascend (a `__vector__` kernel named `vector_add_kernel_kernel`) *and* compiles for the CPU, so
`tilescope collect --ir-only` can check its result against the reference on any machine.

    tilescope collect sample_traces/kernels/collect_vector_add.py:vector_add --param N=8192 \
        --ir-only --out runs/vadd
"""

import tilelang.language as T


def vector_add(N=4096, block=256, dtype="float32"):
    @T.prim_func
    def vector_add_kernel(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
                          C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            ub = T.alloc_shared((2, block), dtype)  # row 0: A tile (then the sum), row 1: B tile
            T.copy(A[bx * block:(bx + 1) * block], ub[0, :])
            T.copy(B[bx * block:(bx + 1) * block], ub[1, :])
            for i in T.serial(block):
                ub[0, i] = ub[0, i] + ub[1, i]
            T.copy(ub[0, :], C[bx * block:(bx + 1) * block])

    return vector_add_kernel


# The input spec `tilescope collect` reads (docs/collecting.md): inputs in argument order, the
# output argument indexes, and the reference the result is checked against.
TILESCOPE_SPEC = {
    "vector_add": {
        "inputs": [("A", ("N",), "dtype"), ("B", ("N",), "dtype")],
        "out_idx": [2],
        "reference": lambda A, B: A + B,
        "atol": 1e-5,
        "rtol": 1e-5,
    },
}
