//! Checkpointing lowers the peak of allocated memory (the CPU allocator's
//! own statistics). One test per binary: the allocator's counters are per process.

use std::sync::Arc;
use strata_alloc::{max_memory_allocated, memory_allocated, reset_peak_memory_stats};
use strata_autograd::nn::Linear;
use strata_autograd::{checkpoint_blocks, Var};
use strata_tensor::{DType, Device, Tensor};

const DEV: Device = Device::Cpu;

/// A transformer-style MLP block: `x + fc2(relu(fc1(x)))`, 4x wide inside.
struct Block {
    fc1: Linear,
    fc2: Linear,
}

fn block(b: &Block, x: &Var) -> strata_autograd::Result<Var> {
    x.add(&b.fc2.forward(&b.fc1.forward(x)?.relu()?)?)
}

/// Peak allocated above the starting point during forward and backward.
fn peak(layers: &[Arc<Block>], x: &Var, every: usize) -> u64 {
    let base = memory_allocated(DEV).unwrap();
    reset_peak_memory_stats(DEV).unwrap();
    let h = checkpoint_blocks(layers, every, x, block).unwrap();
    let loss = h.mul(&h).unwrap().mean(None, false).unwrap();
    drop(h);
    loss.backward().unwrap();
    drop(loss);
    for b in layers {
        for l in [&b.fc1, &b.fc2] {
            l.weight.zero_grad(true).unwrap();
            l.bias.as_ref().unwrap().zero_grad(true).unwrap();
        }
    }
    max_memory_allocated(DEV).unwrap() - base
}

#[test]
fn checkpointing_every_block_lowers_peak_allocated() {
    let layers: Vec<Arc<Block>> = (0..8)
        .map(|_| {
            Arc::new(Block {
                fc1: Linear::new(128, 512, true, DEV).unwrap(),
                fc2: Linear::new(512, 128, true, DEV).unwrap(),
            })
        })
        .collect();
    let x = Var::new(Tensor::randn(&[1024, 128], DType::F32, 1, DEV).unwrap());
    let act = 1024 * 128 * 4;
    let plain = peak(&layers, &x, 0);
    let every = peak(&layers, &x, 1);
    let half = peak(&layers, &x, 2);
    // Plain keeps each block's input and its 4x-wide relu output: 5 activations a block.
    assert!(plain >= 8 * 5 * act, "plain {plain}");
    assert!(every * 2 < plain, "every block: {every} vs plain {plain}");
    assert!(
        half < plain && half > every,
        "every 2nd: {half}, every {every}, plain {plain}"
    );
}
