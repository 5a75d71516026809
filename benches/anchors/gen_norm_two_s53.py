"""2-norms from PyTorch's CPU kernels, for
crates/strata-tensor/tests/suite/pytorch_order_s52.rs's
`two_norms_match_pytorch_bit_for_bit` (session 53).

    OMP_NUM_THREADS=1 python benches/anchors/gen_norm_two_s53.py N SEED OUT.json.gz

The cases of gen_norm_order_s52.py (same format: random f32/f64/f16/bf16
tensors, permuted, sliced, broadcast, reduced over random dims) with the
order fixed at 2, so that both of PyTorch's 2-norm kernels run: the
vectorised last-dim one (f32, f64 and bf16 reduced over one contiguous
innermost run) and NormTwoOps elsewhere."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_norm_order_s52  # noqa: E402


def main():
    n, seed, path = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.argv = [sys.argv[0], n, path, "2", seed]
    gen_norm_order_s52.main()


if __name__ == "__main__":
    main()
