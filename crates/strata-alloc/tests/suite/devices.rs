//! Every per-device memory function rejects a device that does not exist, as
//! PyTorch does ("invalid device ordinal"), and accepts the CPU (an allocator
//! installed for a device makes it valid: see `settings.rs`, whose process
//! may install one for cuda:0).

use strata_alloc::{AllocError, Device, StreamId};

/// GPUs visible to this process.
fn gpus() -> usize {
    #[cfg(feature = "cuda")]
    {
        strata_alloc::driver::cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

/// Every memory function of the registry on `device`, as `Result<(), _>`.
fn every_function(device: Device) -> Vec<(&'static str, Result<(), AllocError>)> {
    vec![
        ("memory_stats", strata_alloc::memory_stats(device).map(drop)),
        (
            "memory_allocated",
            strata_alloc::memory_allocated(device).map(drop),
        ),
        (
            "memory_reserved",
            strata_alloc::memory_reserved(device).map(drop),
        ),
        (
            "max_memory_allocated",
            strata_alloc::max_memory_allocated(device).map(drop),
        ),
        (
            "max_memory_reserved",
            strata_alloc::max_memory_reserved(device).map(drop),
        ),
        (
            "reset_peak_memory_stats",
            strata_alloc::reset_peak_memory_stats(device),
        ),
        (
            "reset_accumulated_memory_stats",
            strata_alloc::reset_accumulated_memory_stats(device),
        ),
        ("empty_cache", strata_alloc::empty_cache(device)),
        (
            "memory_summary",
            strata_alloc::memory_summary(device).map(drop),
        ),
    ]
}

#[test]
fn a_device_that_does_not_exist_is_a_typed_error_everywhere() {
    let n = gpus();
    // cuda:N for every N at or past the GPU count; cuda:0 too without a GPU.
    for ordinal in [n, n + 1, n + 7, 1 << 20] {
        let device = Device::Cuda(ordinal);
        for (name, r) in every_function(device) {
            match r {
                Err(AllocError::Unavailable { device: d, reason }) => {
                    assert_eq!(d, device, "{name}");
                    assert!(!reason.is_empty(), "{name}");
                    let msg = AllocError::Unavailable { device: d, reason }.to_string();
                    assert!(msg.contains(&format!("cuda:{ordinal}")), "{name}: {msg}");
                }
                other => panic!("{name}({device}): expected Unavailable, got {other:?}"),
            }
        }
        // Nothing was created for it.
        assert!(strata_alloc::existing_allocator(device).is_none());
    }
    // A visible GPU is accepted.
    for ordinal in 0..n {
        for (name, r) in every_function(Device::Cuda(ordinal)) {
            assert!(r.is_ok(), "{name}(cuda:{ordinal}): {r:?}");
        }
    }
}

#[test]
fn the_cpu_always_exists() {
    for (name, r) in every_function(Device::Cpu) {
        assert!(r.is_ok(), "{name}: {r:?}");
    }
    let a = strata_alloc::allocator(Device::Cpu).unwrap();
    let x = a.allocate(1 << 20, StreamId::DEFAULT).unwrap();
    assert!(strata_alloc::memory_allocated(Device::Cpu).unwrap() >= 1 << 20);
    assert!(strata_alloc::memory_summary(Device::Cpu)
        .unwrap()
        .contains("device cpu"));
    drop(x);
}
