//! Memory behaviour measured with the allocator's own statistics: backward
//! releases saved tensors, retain_graph keeps them, no_grad saves nothing.
//! The allocator's counters are per process, so these tests run one at a time.

use parking_lot::Mutex;
use strata_alloc::memory_allocated;
use strata_autograd::{no_grad, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());
const DEV: Device = Device::Cpu;
const SHAPE: [usize; 2] = [128, 256];

fn param() -> Var {
    Var::parameter(Tensor::randn(&SHAPE, DType::F32, 7, DEV).unwrap()).unwrap()
}

/// Bytes the allocator charges for one tensor of SHAPE (measured, not assumed).
fn block_bytes() -> u64 {
    let before = memory_allocated(DEV).unwrap();
    let t = Tensor::zeros(&SHAPE, DType::F32, DEV).unwrap();
    let after = memory_allocated(DEV).unwrap();
    drop(t);
    after - before
}

/// exp saves its result and mul saves both inputs: three SHAPE tensors saved.
fn forward(x: &Var, w: &Var) -> Var {
    let h = x.exp().unwrap();
    let y = h.mul(w).unwrap();
    y.sum(None, false).unwrap()
}

#[test]
fn backward_releases_saved_tensors() {
    let _s = SERIAL.lock();
    let block = block_bytes();
    let (x, w) = (param(), param());
    let base = memory_allocated(DEV).unwrap();
    let loss = forward(&x, &w);
    let after_forward = memory_allocated(DEV).unwrap();
    // h = exp(x) is alive only as a saved tensor (of ExpBackward and MulBackward).
    assert!(
        after_forward - base >= block,
        "the graph holds the saved activation: {after_forward} - {base}"
    );
    // exp saved h, mul saved h and w: two distinct storages (h counted once).
    assert_eq!(loss.graph_saved_bytes() as u64, 2 * block);
    assert_eq!(loss.saved_bytes(), 0, "sum saves nothing");
    loss.backward().unwrap();
    assert_eq!(loss.graph_saved_bytes(), 0, "released by backward");
    let after_backward = memory_allocated(DEV).unwrap();
    // What remains: the two gradients and the loss scalar; the activation is gone.
    assert!(after_backward < after_forward + 2 * block);
    drop(loss);
    assert_eq!(
        memory_allocated(DEV).unwrap(),
        base + 2 * block,
        "only x.grad and w.grad remain"
    );
    assert!(x.grad().is_some() && w.grad().is_some());
}

#[test]
fn second_backward_is_an_error_unless_retained() {
    let _s = SERIAL.lock();
    let block = block_bytes();
    let (x, w) = (param(), param());
    let loss = forward(&x, &w);
    loss.backward().unwrap();
    assert!(matches!(
        loss.backward(),
        Err(AutogradError::GraphReleased { .. })
    ));

    x.zero_grad(true).unwrap();
    w.zero_grad(true).unwrap();
    let base = memory_allocated(DEV).unwrap();
    let loss = forward(&x, &w);
    let with_graph = memory_allocated(DEV).unwrap();
    loss.backward_with(None, true).unwrap();
    // The saved activation is still there, next to the two new gradients.
    assert_eq!(memory_allocated(DEV).unwrap(), with_graph + 2 * block);
    let g1 = x.grad().unwrap().to_vec::<f32>().unwrap();
    loss.backward().unwrap();
    let g2 = x.grad().unwrap().to_vec::<f32>().unwrap();
    for (a, b) in g1.iter().zip(&g2) {
        assert!(
            (2.0 * a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "accumulated twice"
        );
    }
    assert!(matches!(
        loss.backward(),
        Err(AutogradError::GraphReleased { .. })
    ));
    drop(loss);
    assert_eq!(memory_allocated(DEV).unwrap(), base + 2 * block);
}

#[test]
fn no_grad_saves_nothing() {
    let _s = SERIAL.lock();
    let (x, w) = (param(), param());
    let base = memory_allocated(DEV).unwrap();
    let out = no_grad(|| x.exp().unwrap().mul(&w).unwrap());
    let without = memory_allocated(DEV).unwrap() - base;
    assert!(!out.requires_grad() && out.saved_bytes() == 0);
    drop(out);
    assert_eq!(memory_allocated(DEV).unwrap(), base);
    let out = x.exp().unwrap().mul(&w).unwrap();
    let with = memory_allocated(DEV).unwrap() - base;
    assert!(out.saved_bytes() > 0);
    assert!(without < with, "no_grad {without} B vs grad {with} B");
    drop(out);
    assert_eq!(
        memory_allocated(DEV).unwrap(),
        base,
        "dropping the graph frees its saved tensors"
    );
}

#[test]
fn zero_grad_set_to_none_frees_and_zeroing_keeps() {
    let _s = SERIAL.lock();
    let block = block_bytes();
    let x = param();
    x.mul(2.0)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let with_grad = memory_allocated(DEV).unwrap();
    let ptr = x.grad().unwrap().storage_ptr();
    x.zero_grad(false).unwrap();
    assert_eq!(memory_allocated(DEV).unwrap(), with_grad);
    assert_eq!(x.grad().unwrap().storage_ptr(), ptr, "zeroed in place");
    assert!(x
        .grad()
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|&v| v == 0.0));
    x.zero_grad(true).unwrap();
    assert!(x.grad().is_none());
    assert_eq!(memory_allocated(DEV).unwrap(), with_grad - block);
}

/// The peak during a backward pass: saved tensors released as the pass goes
/// make it lower than with retain_graph, where they all stay until the end.
#[test]
fn saved_tensors_are_released_during_the_pass() {
    let _s = SERIAL.lock();
    let peak_of = |retain: bool| -> u64 {
        let x = Var::parameter(Tensor::randn(&[4, 4096], DType::F32, 3, DEV).unwrap()).unwrap();
        // Leaf side: exp saves a [4, 4096] result; root side: exp saves a [4096] result.
        let loss = x
            .exp()
            .unwrap()
            .sum(Some(&[0]), false)
            .unwrap()
            .div(4.0)
            .unwrap()
            .exp()
            .unwrap()
            .sum(None, false)
            .unwrap();
        let before = memory_allocated(DEV).unwrap();
        strata_alloc::reset_peak_memory_stats(DEV).unwrap();
        loss.backward_with(None, retain).unwrap();
        strata_alloc::max_memory_allocated(DEV).unwrap() - before
    };
    let released = peak_of(false);
    let retained = peak_of(true);
    // At least the root-side saved result ([4096] f32) is gone before the
    // leaf-side gradient is computed.
    assert!(
        released + 4096 * 4 <= retained,
        "peak above the graph: {released} B released as it goes vs {retained} B retained"
    );
}
