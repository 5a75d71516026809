//! The recomputing attention op splits a large batch into pieces, so its
//! forward and backward hold one piece's probabilities and score gradient
//! at a time (the CPU allocator's own statistics). One test per binary: the
//! allocator's counters are per process.

use strata_alloc::{max_memory_allocated, memory_allocated, reset_peak_memory_stats};
use strata_autograd::{AttentionArgs, AttentionSaving, Var};
use strata_tensor::{DType, Device, Tensor};

const DEV: Device = Device::Cpu;

/// Peak allocated above the starting point during forward and backward of
/// `sum(attention(q, k, v))`.
fn peak(q: &Var, k: &Var, v: &Var, saving: AttentionSaving) -> u64 {
    let base = memory_allocated(DEV).unwrap();
    reset_peak_memory_stats(DEV).unwrap();
    let args = AttentionArgs {
        causal: true,
        saving,
        ..Default::default()
    };
    let y = q.attention(k, v, args).unwrap();
    let loss = y.sum(None, false).unwrap();
    drop(y);
    loss.backward().unwrap();
    drop(loss);
    for x in [q, k, v] {
        assert!(x.grad().is_some());
        x.zero_grad(true).unwrap();
    }
    max_memory_allocated(DEV).unwrap() - base
}

#[test]
fn recompute_holds_one_piece_of_the_probabilities_at_a_time() {
    // [4, 2, 256, 256] f64 probabilities: 4 MiB, split into four pieces.
    let (b, h, t, hd) = (4, 2, 256, 32);
    let probs = (b * h * t * t * 8) as u64;
    let leaf = |seed| {
        Var::parameter(Tensor::randn(&[b, h, t, hd], DType::F64, seed, DEV).unwrap()).unwrap()
    };
    let (q, k, v) = (leaf(1), leaf(2), leaf(3));
    let keep = peak(&q, &k, &v, AttentionSaving::SaveProbs);
    let recompute = peak(&q, &k, &v, AttentionSaving::Recompute);
    // Keeping the probabilities, the backward holds them and their
    // gradient: at least two full score tensors.
    assert!(keep >= 2 * probs, "keep {keep}, probabilities {probs}");
    // In pieces: two quarter-size score tensors plus the q/k/v-sized
    // outputs and gradients (0.5 MiB each), well under one and a half
    // full score tensors.
    assert!(
        recompute * 2 < probs * 3,
        "recompute {recompute}, probabilities {probs}"
    );
}
