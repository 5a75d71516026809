//! Session 82: `dist` and `diagflat` against PyTorch 2.15's CPU
//! (`benches/anchors/gen_like_s82.py`, through `shape_stats_s79`'s
//! replay), and the `*_as` and `new_*` forms against what they are made of.

use crate::shape_stats_s79::assert_fixture_agrees;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor, TensorError};

static TEXT: LazyLock<String> =
    LazyLock::new(|| crate::pytorch_fixture::gunzip(include_bytes!("../data/like_s82.json.gz")));

#[test]
fn dist_and_diagflat_match_pytorch() {
    assert_fixture_agrees(&TEXT, 1_200, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn dist_and_diagflat_match_pytorch_on_a_gpu() {
    assert_fixture_agrees(&TEXT, 1_200, crate::hostile_calls::gpu());
}

#[test]
fn the_as_forms_take_the_other_tensors_shape_or_dtype() {
    let a = Tensor::arange(0, 6, 1, None, Device::Cpu).unwrap();
    let like = Tensor::zeros(&[3, 2], DType::F64, Device::Cpu).unwrap();
    let v = a.view_as(&like).unwrap();
    assert_eq!(
        (v.shape(), v.strides()),
        (&[3usize, 2][..], &[2usize, 1][..])
    );
    assert_eq!(a.reshape_as(&like.t().unwrap()).unwrap().shape(), &[2, 3]);
    // view_as of a transpose that cannot be viewed fails as view fails.
    let t = v.t().unwrap();
    assert!(matches!(t.view_as(&a), Err(TensorError::Layout { .. })));
    assert_eq!(
        t.reshape_as(&a).unwrap().to_vec::<i64>().unwrap(),
        [0, 2, 4, 1, 3, 5]
    );
    let col = Tensor::ones(&[3, 1], DType::F32, Device::Cpu).unwrap();
    let e = col.expand_as(&like).unwrap();
    assert_eq!(
        (e.shape(), e.strides()),
        (&[3usize, 2][..], &[1usize, 0][..])
    );
    assert!(a.expand_as(&like).is_err()); // [6] does not broadcast to [3, 2]
    let c = a.type_as(&like).unwrap();
    assert_eq!(
        (c.dtype(), c.to_vec::<f64>().unwrap()),
        (DType::F64, vec![0., 1., 2., 3., 4., 5.])
    );
    let n = like.new_ones(&[2]).unwrap();
    assert_eq!(
        (n.dtype(), n.to_vec::<f64>().unwrap()),
        (DType::F64, vec![1., 1.])
    );
    // As PyTorch's `new_full` on u8: -1 is 255, 256 "cannot be converted to
    // type uint8_t without overflow".
    let u = a.to_dtype(DType::U8).unwrap();
    assert_eq!(u.new_full(&[1], -1).unwrap().to_vec::<u8>().unwrap(), [255]);
    assert!(matches!(
        u.new_full(&[1], 256),
        Err(TensorError::Value { .. })
    ));
    assert!(like.new_zeros(&[usize::MAX, 2]).is_err());
}
