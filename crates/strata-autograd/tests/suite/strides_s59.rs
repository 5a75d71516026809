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

/// SGD's first momentum buffer is PyTorch's `torch.clone(grad)`
/// (`preserve_format`): for a `.grad` set to a transposed view with gaps it
/// is dense in the gradient's stride order, and that layout decides which
/// bf16 elements of the later `add_`s take PyTorch's scalar loop. Expected
/// bits from PyTorch 2.15 in the venv (one thread):
/// `p0 = tensor([((i*37) % 101 - 50) / 64 for i in range(120)]).reshape(40, 3).bfloat16()`,
/// `SGD([p], lr=0.1, momentum=0.9, dampening=0.3)`, three steps, step `s`
/// with `p.grad = base[:, :40].t()` where
/// `base = tensor([((i*13 + 7*s) % 97 - 48) / 128 for i in range(126)]).reshape(3, 42).bfloat16()`;
/// the momentum buffer's strides are `(1, 40)`, and 10 of the 120 results
/// differ from those of the same steps with `g.contiguous()` (so a
/// row-major buffer, as before, fails this test).
#[test]
fn sgd_momentum_buffer_of_a_gapped_grad_keeps_its_stride_order() {
    use strata_autograd::optim::{Optimizer, Sgd};
    let p0: Vec<f32> = (0..120)
        .map(|i| (((i * 37) % 101) as f32 - 50.0) / 64.0)
        .collect();
    let p0 = Tensor::from_slice(&p0, &[40, 3], Device::Cpu)
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap();
    let p = Var::parameter(p0).unwrap();
    let mut opt = Sgd::new(vec![p.clone()], 0.1, 0.9)
        .unwrap()
        .with_dampening(0.3)
        .unwrap();
    for s in 0..3 {
        let base: Vec<f32> = (0..126)
            .map(|i| (((i * 13 + 7 * s) % 97) as f32 - 48.0) / 128.0)
            .collect();
        let base = Tensor::from_slice(&base, &[3, 42], Device::Cpu)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let g = base.narrow(1, 0, 40).unwrap().t().unwrap();
        assert_eq!(g.strides(), [1, 42]);
        p.set_grad(Some(g)).unwrap();
        opt.step().unwrap();
    }
    let want: [u16; 120] = [
        48926, 48776, 16100, 48899, 48674, 16141, 48846, 15208, 16169, 48790, 16086, 48975, 48702,
        16135, 48947, 48544, 16162, 48865, 15610, 16190, 48639, 16022, 48954, 48268, 16155, 48926,
        15802, 16183, 48899, 15948, 16211, 48767, 16030, 48934, 15746, 16085, 48906, 15919, 16147,
        48861, 16016, 48918, 48779, 16070, 48886, 15891, 16126, 48830, 16001, 16155, 48774, 16055,
        48976, 48670, 16111, 48844, 48447, 16147, 48789, 15741, 16174, 48700, 16038, 48969, 48537,
        16163, 48902, 15626, 16191, 48727, 15888, 48953, 48592, 15998, 48926, 15292, 16132, 48898,
        15850, 16211, 48845, 15970, 48933, 48757, 16041, 48905, 15923, 16123, 48859, 16017, 16232,
        48804, 16071, 48912, 48729, 16127, 48874, 48466, 16155, 48818, 16058, 48990, 48759, 16113,
        48961, 48648, 16147, 48892, 48326, 16176, 48696, 15988, 48969, 48530, 16141, 48940, 15640,
        16168, 48899, 15892,
    ];
    // bf16 widens to f32 exactly: its bits are the f32's upper half.
    let got: Vec<u16> = p
        .data()
        .to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| (x.to_bits() >> 16) as u16)
        .collect();
    assert_eq!(got, want);
}
