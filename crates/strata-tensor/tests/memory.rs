//! Storage comes from the caching allocator: views share it, in-place ops
//! allocate nothing, and dropping the last view returns the block to the
//! cache. One test function, so no other test in this process allocates
//! concurrently and the global statistics are exact.

use strata_alloc::memory_stats;
use strata_tensor::{default_device, DType, Device, Tensor, TensorError};

fn allocated() -> (i64, i64) {
    let m = memory_stats(Device::Cpu).unwrap().to_map();
    (
        m["allocated_bytes.all.current"],
        m["allocation.all.current"],
    )
}

#[test]
fn storage_lifetime_devices_and_errors() {
    let (b0, n0) = allocated();
    let a = Tensor::zeros(&[64, 64], DType::F32, Device::Cpu).unwrap();
    let (b1, n1) = allocated();
    assert_eq!(n1, n0 + 1);
    assert!(b1 - b0 >= 64 * 64 * 4);

    // Views and clones of the handle share the block.
    let v = a.t().unwrap().narrow(0, 3, 10).unwrap();
    let c = a.clone();
    assert!(v.same_storage(&a) && c.same_storage(&a));
    assert_eq!(v.storage_ptr(), a.storage_ptr());
    assert_eq!(allocated(), (b1, n1));

    // In-place ops allocate nothing and bump the shared version counter.
    let row = Tensor::ones(&[64], DType::F32, Device::Cpu).unwrap();
    let (b2, n2) = allocated();
    let v0 = a.version();
    a.add_(&row).unwrap();
    v.mul_(3.0).unwrap();
    a.fill_(1.5).unwrap();
    assert_eq!(allocated(), (b2, n2));
    assert_eq!(a.version(), v0 + 3);
    assert_eq!(v.version(), a.version());

    // The block goes back to the cache only when the last view is dropped.
    drop(a);
    drop(c);
    assert_eq!(allocated(), (b2, n2));
    drop(v);
    let (b3, n3) = allocated();
    assert_eq!(n3, n2 - 1);
    assert_eq!(b3, b2 - (b1 - b0));
    drop(row);

    // Without a usable GPU, CUDA tensors report a typed error (no panic).
    let gpu = strata_tensor::has_backend(Device::Cuda(0));
    match Tensor::zeros(&[2], DType::F32, Device::Cuda(0)) {
        Ok(t) if gpu => assert_eq!(t.device(), Device::Cuda(0)),
        Err(TensorError::BackendUnavailable { device, .. }) if !gpu => {
            assert_eq!(device, Device::Cuda(0))
        }
        other => panic!("expected BackendUnavailable without a GPU, got {other:?}"),
    }

    // STRATA_DEVICE picks the device; a malformed value is an error, and so
    // is a device that cannot be used here (checked now, not at the first tensor).
    for (var, d) in [
        ("cuda", Device::Cuda(0)),
        ("cuda:1", Device::Cuda(1)),
        ("cuda:7", Device::Cuda(7)),
    ] {
        std::env::set_var("STRATA_DEVICE", var);
        match default_device() {
            Ok(got) if strata_tensor::has_backend(d) => assert_eq!(got, d),
            Err(TensorError::BackendUnavailable { device, .. })
                if !strata_tensor::has_backend(d) =>
            {
                assert_eq!(device, d)
            }
            other => panic!("STRATA_DEVICE={var}: got {other:?}"),
        }
    }
    std::env::set_var("STRATA_DEVICE", "cpu");
    assert_eq!(default_device().unwrap(), Device::Cpu);
    std::env::set_var("STRATA_DEVICE", "tpu");
    assert!(default_device().is_err());
    std::env::remove_var("STRATA_DEVICE");
    // Without a usable GPU the default is the CPU, with one cuda:0.
    let expected = if gpu { Device::Cuda(0) } else { Device::Cpu };
    assert_eq!(default_device().unwrap(), expected);
}
