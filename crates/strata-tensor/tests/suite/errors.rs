//! Bad input gives a typed error whose message names the shapes (or dtypes),
//! and leaves the operands untouched.

use strata_tensor::{DType, Device, Tensor, TensorError};

fn t(shape: &[usize]) -> Tensor {
    Tensor::ones(shape, DType::F32, Device::Cpu).unwrap()
}

#[test]
fn errors_name_what_was_wrong() {
    let a = t(&[3, 4]);
    let e = a.add(&t(&[5])).unwrap_err();
    assert!(matches!(e, TensorError::Broadcast { .. }));
    assert!(
        e.to_string().contains("[3, 4]") && e.to_string().contains("[5]"),
        "{e}"
    );

    let col = t(&[3, 1]);
    let e = col.add_(&a).unwrap_err();
    assert!(matches!(e, TensorError::InPlaceBroadcast { .. }));
    assert!(
        e.to_string().contains("[3, 1]") && e.to_string().contains("[3, 4]"),
        "{e}"
    );
    assert_eq!(col.to_vec::<f32>().unwrap(), vec![1.0; 3]);

    let e = a.mm(&t(&[5, 2])).unwrap_err();
    assert!(
        e.to_string().contains("[3, 4]") && e.to_string().contains("[5, 2]"),
        "{e}"
    );

    let e = a.t().unwrap().view(&[12]).unwrap_err();
    assert!(matches!(e, TensorError::Layout { .. }), "{e}");

    let i = Tensor::zeros(&[2], DType::I32, Device::Cpu).unwrap();
    let e = i.add_(0.5).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }));
    assert!(
        e.to_string().contains("f32") && e.to_string().contains("i32"),
        "{e}"
    );

    let e = a.as_strided(&[4, 4], &[4, 1], None).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::OutOfBounds {
                needed: 16,
                available: 12,
                ..
            }
        ),
        "{e}"
    );

    let e = a.expand(&[2, 3, 4]).unwrap().add_(1.0).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");

    let e = a.narrow(1, 2, 5).unwrap_err();
    assert!(matches!(e, TensorError::Index { .. }), "{e}");
    assert!(matches!(
        a.transpose(0, 2).unwrap_err(),
        TensorError::Dim { .. }
    ));
    assert!(matches!(
        t(&[0, 3]).max().unwrap_err(),
        TensorError::Empty { .. }
    ));
    assert!(matches!(
        a.item::<f32>().unwrap_err(),
        TensorError::Shape { .. }
    ));
    assert!(matches!(
        a.to_vec::<f64>().unwrap_err(),
        TensorError::DType { .. }
    ));
}
