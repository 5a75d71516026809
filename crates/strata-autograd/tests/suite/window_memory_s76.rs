//! Session 76: what a recorded convolution or pooling keeps for its
//! backward. A convolution saves its input and weight, not the im2col
//! columns (9 x its input for a 3 x 3 kernel), which its backward
//! recomputes; max pooling saves only its indices; average pooling saves
//! nothing. The gradients are checked against PyTorch by `conv_pool_s75`.

use strata_autograd::Var;
use strata_tensor::{ConvOptions, DType, Device, PoolOptions, Tensor};

fn param(shape: &[usize], seed: u64) -> Var {
    Var::parameter(Tensor::randn(shape, DType::F32, seed, Device::Cpu).unwrap()).unwrap()
}

#[test]
fn a_convolution_keeps_its_input_and_weight_not_its_columns() {
    let x = param(&[2, 3, 8, 8], 1);
    let w = param(&[4, 3, 3, 3], 2);
    let b = param(&[4], 3);
    let y = x
        .conv2d(&w, Some(&b), &ConvOptions::new().padding(&[1]))
        .unwrap();
    let (xb, wb) = (2 * 3 * 8 * 8 * 4, 4 * 3 * 3 * 3 * 4);
    let columns = 2 * (3 * 9) * 64 * 4;
    assert_eq!(y.graph_saved_bytes(), xb + wb);
    assert!(y.graph_saved_bytes() < columns);
    // Its backward still reaches all three.
    y.sum(None, false).unwrap().backward().unwrap();
    for v in [&x, &w, &b] {
        assert_eq!(v.grad().unwrap().shape(), v.shape());
    }
    // A constant bias gets no gradient.
    let frozen = Var::new(Tensor::randn(&[4], DType::F32, 4, Device::Cpu).unwrap());
    let y = x.conv2d(&w, Some(&frozen), &ConvOptions::new()).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    assert!(frozen.grad().is_none());
}

#[test]
fn pooling_keeps_indices_or_nothing() {
    let x = param(&[2, 3, 8, 8], 5);
    let opts = PoolOptions::new(&[2]);
    let (y, idx) = x.max_pool2d_with_indices(&opts).unwrap();
    assert_eq!(idx.dtype(), DType::I64);
    // The indices (i64, one per output) and nothing else.
    assert_eq!(y.graph_saved_bytes(), idx.numel() * 8);
    let a = x.avg_pool2d(&opts).unwrap();
    assert_eq!(a.graph_saved_bytes(), 0);
    let total = y
        .sum(None, false)
        .unwrap()
        .add(&a.sum(None, false).unwrap())
        .unwrap();
    total.backward().unwrap();
    // Each 2 x 2 window sends 1 to its maximum and 1/4 to every element.
    let g: Vec<f32> = x.grad().unwrap().to_vec().unwrap();
    let ones = g.iter().filter(|&&v| v == 1.25).count();
    assert_eq!(ones, y.numel());
    assert_eq!(
        g.iter().filter(|&&v| v == 0.25).count(),
        g.len() - y.numel()
    );
}
