//! Session 59: `Var::to_dtype` lays its result and its gradient out as
//! PyTorch's `.to(dtype)` and `ToCopyBackward` do (a dense layout kept).
//! Expected strides checked with PyTorch 2.15 in the venv:
//! `w = torch.zeros(4, 3, requires_grad=True); y = (w * 1).t().to(torch.float64)`
//! gives `y.stride() == (1, 3)`, and after `(y * c).sum().backward()`,
//! `w.grad.stride() == (3, 1)`; the same without the `* 1` (a leaf's
//! transpose) also `(1, 3)` and `(3, 1)`.

use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

#[test]
fn to_dtype_keeps_a_dense_layout_and_grads_follow_pytorch() {
    let c: Vec<f64> = (0..12).map(f64::from).collect();
    let c = Tensor::from_slice(&c, &[3, 4], Device::Cpu).unwrap();
    for through_mul in [true, false] {
        let w = Var::new(Tensor::zeros(&[4, 3], DType::F32, Device::Cpu).unwrap());
        w.requires_grad_(true).unwrap();
        let x = if through_mul {
            w.mul(1.0).unwrap()
        } else {
            w.clone()
        };
        let y = x.t().unwrap().to_dtype(DType::F64).unwrap();
        assert_eq!(y.data().strides(), [1, 3], "mul first: {through_mul}");
        y.mul(&Var::new(c.clone()))
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let g = w.grad().unwrap();
        assert_eq!(g.strides(), [3, 1], "mul first: {through_mul}");
        // d/dw of sum(w.t() * c) is c.t().
        let want: Vec<f32> = (0..4)
            .flat_map(|i| (0..3).map(move |j| (j * 4 + i) as f32))
            .collect();
        assert_eq!(g.to_vec::<f32>().unwrap(), want);
    }
}
