//! Inference mode does less work per op than no_grad: counted as heap
//! allocations made by the thread running the ops (a counting global
//! allocator; the count is per thread, so other tests cannot disturb it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use strata_autograd::{inference_mode, no_grad, Var};
use strata_tensor::{DType, Device, Tensor};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a const-initialised thread-local Cell, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

/// A short inference-style sequence of ops on inputs that require grad.
fn ops(x: &Var, w: &Var) {
    for _ in 0..20 {
        let y = x.matmul(w).unwrap().add(w).unwrap().relu().unwrap();
        let z = y.transpose(0, 1).unwrap().mul(2.0).unwrap();
        let s = z.sum(None, false).unwrap();
        assert!(!s.requires_grad());
    }
}

#[test]
fn inference_mode_allocates_less_per_op_than_no_grad() {
    let x = Var::parameter(Tensor::ones(&[4, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
    let w = Var::parameter(Tensor::ones(&[4, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
    // Warm up (lazily initialised state, allocator caches).
    no_grad(|| ops(&x, &w));
    inference_mode(|| ops(&x, &w));
    let ng = allocations(|| no_grad(|| ops(&x, &w)));
    let im = allocations(|| inference_mode(|| ops(&x, &w)));
    // 6 recorded ops per round, 20 rounds: at least one edge list saved per op.
    assert!(
        im + 120 <= ng,
        "inference mode: {im} allocations, no_grad: {ng}"
    );
    // Results are the same.
    let a = no_grad(|| x.matmul(&w).unwrap().to_vec::<f32>().unwrap());
    let b = inference_mode(|| x.matmul(&w).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(a, b);
}

#[test]
fn inplace_on_a_parameter_is_allowed_in_inference_mode() {
    let w = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    assert!(no_grad(|| w.add_(1.0).map(|_| ())).is_ok());
    inference_mode(|| w.mul_(3.0).map(|_| ())).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![6.0, 6.0]);
    assert!(w.add_(1.0).is_err(), "outside, the leaf rule holds again");
}
