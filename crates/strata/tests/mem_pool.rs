//! Tensors made while a private memory pool is active come from the pool
//! (PyTorch's `with torch.cuda.use_mem_pool(pool): t = torch.empty(...)`),
//! on the device `STRATA_DEVICE` names (the CPU by default).

use strata::{mem_pool, DType, Device, MemPoolOptions, Tensor};

fn device() -> Device {
    std::env::var("STRATA_DEVICE")
        .unwrap_or_else(|_| "cpu".into())
        .parse()
        .unwrap()
}

#[test]
fn tensors_made_in_a_pool_live_in_its_segments() {
    let dev = device();
    let pool = mem_pool(dev, MemPoolOptions::default()).unwrap();
    let (inside, result) = {
        let _in_pool = pool.activate().unwrap();
        let x = Tensor::ones(&[1024, 1024], DType::F32, dev).unwrap();
        // Every intermediate and result of the ops comes from the pool too.
        let y = (&x * 3.0).unwrap();
        (x, y)
    };
    let outside = Tensor::zeros(&[1024, 1024], DType::F32, dev).unwrap();
    let in_pool = |t: &Tensor| {
        pool.snapshot()
            .iter()
            .any(|s| s.blocks.iter().any(|b| b.address == t.data_ptr()))
    };
    assert!(in_pool(&inside) && in_pool(&result));
    assert!(!in_pool(&outside));
    assert_eq!(
        result.sum(None, false).unwrap().item::<f64>().unwrap(),
        3.0 * 1048576.0
    );
    // The pool's memory is the device's: counted in its statistics.
    let reserved_in_pool: u64 = pool.snapshot().iter().map(|s| s.total_size).sum();
    assert!(strata::memory_reserved(dev).unwrap() >= reserved_in_pool);
    assert_eq!(pool.use_count(), 1);
}
