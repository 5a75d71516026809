//! Issue 17 without a GPU: the communicator's typed errors (a CPU device,
//! too few GPUs, bad unique ids, NCCL missing). The GPU tests of the
//! collectives are at the end of `tests/cuda.rs`.

use strata_tensor::distributed::{nccl_available, nccl_unavailable_reason, Communicator, UniqueId};
use strata_tensor::{cuda, Device, TensorError};

#[test]
fn a_cpu_device_or_no_device_is_a_typed_error() {
    let e = Communicator::for_devices(&[Device::Cpu]).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    assert!(e.to_string().contains("cpu"), "{e}");
    let e = Communicator::for_devices(&[]).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    let id = UniqueId::from_bytes(&[0; UniqueId::BYTES]).unwrap();
    let e = Communicator::init_rank(Device::Cpu, 0, 1, &id).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    let e = Communicator::init_rank(Device::Cuda(0), 2, 2, &id).unwrap_err();
    assert!(e.to_string().contains("rank 2"), "{e}");
}

#[test]
fn too_few_gpus_is_a_typed_error_naming_the_count() {
    let count = cuda::device_count();
    let want: Vec<Device> = (0..=count).map(Device::Cuda).collect();
    let e = Communicator::for_devices(&want).unwrap_err();
    match &e {
        TensorError::BackendUnavailable { device, reason } => {
            assert_eq!(*device, Device::Cuda(count));
            assert!(
                reason.contains(&format!("{count} GPU(s) are visible")),
                "{reason}"
            );
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn unique_ids_round_trip_through_bytes_and_bad_lengths_are_refused() {
    let bytes: Vec<u8> = (0..UniqueId::BYTES).map(|i| (i * 7) as u8).collect();
    let id = UniqueId::from_bytes(&bytes).unwrap();
    assert_eq!(id.as_bytes().as_slice(), bytes.as_slice());
    for n in [0usize, 127, 129] {
        let e = UniqueId::from_bytes(&vec![0; n]).unwrap_err();
        assert!(e.to_string().contains(&format!("got {n}")), "{e}");
    }
}

/// Without a GPU (this CI machine), stream priorities are typed errors too.
#[test]
fn stream_priorities_without_a_gpu_are_typed_errors() {
    if strata_tensor::cuda::is_available() {
        eprintln!("a GPU is present here; tests/cuda.rs checks priorities");
        return;
    }
    let d = strata_tensor::Device::Cuda(0);
    for e in [
        strata_tensor::cuda::Stream::with_priority(d, -1).unwrap_err(),
        strata_tensor::cuda::Stream::priority_range(d).unwrap_err(),
        strata_tensor::cuda::Stream::default_stream(d)
            .priority()
            .unwrap_err(),
    ] {
        assert!(matches!(e, TensorError::BackendUnavailable { .. }), "{e}");
    }
}

/// Where NCCL is missing (this CI machine), asking for it is a typed error
/// that names the library and where it was looked for; nothing panics.
#[test]
fn missing_nccl_is_a_typed_error_naming_what_is_missing() {
    if nccl_available() {
        eprintln!("NCCL is present here; nothing to check");
        return;
    }
    let reason = nccl_unavailable_reason().unwrap();
    assert!(
        reason.contains("NCCL") || reason.contains("`cuda` feature"),
        "{reason}"
    );
    let e = UniqueId::new().unwrap_err();
    assert!(matches!(e, TensorError::BackendUnavailable { .. }), "{e}");
    if !reason.contains("`cuda` feature") {
        assert!(reason.contains("STRATA_NCCL_LIBRARY"), "{reason}");
        // NVLS is turned off before NCCL would have loaded.
        assert!(std::env::var("NCCL_NVLS_ENABLE").is_ok());
    }
}
