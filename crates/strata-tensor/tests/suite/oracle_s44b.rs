//! Disagreements with PyTorch 2.15 (CPU) found by the S45 families of
//! `benches/anchors/fuzz_conformance_ops.py` (seeds >= 3190); each expected
//! answer is what PyTorch gives for the same call.

use strata_tensor::{DType, Device, Tensor, TensorError};

/// `fuzz_ops.s3191_masked2_0877`: `x.masked_scatter_(mask, source)` where
/// the mask would enlarge x *and* source's dtype differs from x's. PyTorch
/// checks the dtypes first ("masked_scatter: expected self and source to
/// have same dtypes but got Double and Bool"); strata reported the
/// broadcast.
#[test]
fn masked_scatter_inplace_checks_dtype_before_broadcast() {
    let x = Tensor::zeros(&[4, 1], DType::F64, Device::Cpu).unwrap();
    let m = Tensor::from_slice(&[true, false], &[1, 2], Device::Cpu).unwrap();
    let s = Tensor::ones(&[8], DType::Bool, Device::Cpu).unwrap();
    let e = x.masked_scatter_(&m, &s).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }), "{e:?}");
    // With matching dtypes the same call is PyTorch's broadcast error
    // ("The expanded size of the tensor (1) must match the existing size (2)").
    let s = Tensor::ones(&[8], DType::F64, Device::Cpu).unwrap();
    let e = x.masked_scatter_(&m, &s).unwrap_err();
    assert!(matches!(e, TensorError::InPlaceBroadcast { .. }), "{e:?}");
    // Nothing was written.
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![0.0; 4]);
}
