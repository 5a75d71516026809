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

    unit_kernel_convolutions_take_their_output_alone();
}

/// A 1x1 convolution with stride 1 and no padding multiplies the input
/// itself (its columns are a view), so a batch larger than the chunk bound
/// is not cut into chunks: the forward allocates its output and nothing
/// more, the input's gradient the input's size and nothing more. (Cut into
/// chunks, each chunk's product was one more tensor, copied into the
/// whole: twice the output at the peak.) A 3x3 kernel still is chunked.
fn unit_kernel_convolutions_take_their_output_alone() {
    use strata_alloc::{max_memory_allocated, memory_allocated, reset_peak_memory_stats};
    use strata_tensor::{conv_plan, ConvOptions};
    let peak_of = |f: &dyn Fn() -> Tensor| {
        let before = memory_allocated(Device::Cpu).unwrap();
        reset_peak_memory_stats(Device::Cpu).unwrap();
        let y = f();
        let peak = max_memory_allocated(Device::Cpu).unwrap() - before;
        (peak as usize, y.numel() * y.dtype().size())
    };
    let x = Tensor::randn(&[16, 32, 12, 12], DType::F32, 1, Device::Cpu).unwrap();
    let w = Tensor::randn(&[8, 32, 1, 1], DType::F32, 2, Device::Cpu).unwrap();
    let b = Tensor::randn(&[8], DType::F32, 3, Device::Cpu).unwrap();
    // 18 KiB of columns a sample: chunks of 3 samples.
    strata_tensor::set_conv_chunk_bytes(64 << 10);
    let opts = ConvOptions::default();
    let (peak, out) = peak_of(&|| x.conv2d(&w, Some(&b), &opts).unwrap());
    assert_eq!((peak, out), (out, 16 * 8 * 144 * 4), "1x1 forward");
    let plan = conv_plan(
        "conv2d",
        2,
        (x.shape(), DType::F32),
        (w.shape(), DType::F32),
        None,
        &opts,
    )
    .unwrap();
    let g = Tensor::randn(&[16, 8, 12, 12], DType::F32, 4, Device::Cpu).unwrap();
    let (peak, dx) = peak_of(&|| {
        let [dx, _, _] = plan
            .product_backward(&g, &x, &w, [true, false, false])
            .unwrap();
        dx.unwrap()
    });
    assert_eq!((peak, dx), (dx, x.numel() * 4), "1x1 input gradient");
    // The bound still applies where the columns are real (9 times the input).
    let w3 = Tensor::randn(&[8, 32, 3, 3], DType::F32, 5, Device::Cpu).unwrap();
    let pad = ConvOptions {
        padding: strata_tensor::ConvPadding::Explicit(vec![1]),
        ..ConvOptions::default()
    };
    let (peak, out) = peak_of(&|| x.conv2d(&w3, Some(&b), &pad).unwrap());
    assert!(
        peak > out && peak < out + 9 * x.numel() * 4,
        "3x3: {peak} vs {out}"
    );
    strata_tensor::set_conv_chunk_bytes(strata_tensor::DEFAULT_CONV_CHUNK_BYTES);
}
