//! Session 44's sweep of hostile inputs to strata-autograd. Every expected
//! value is PyTorch 2.15's (CPU), with the Python beside each test.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Var::var` and `Var::std` with a NaN correction were refused (the
//!   tensor op's value error); PyTorch returns +inf (its divisor
//!   `max(0, N - NaN)` is 0) and its backward, `2 / (N - NaN) * g * (x -
//!   mean)`, gives NaN gradients. strata now gives both.
//! * `LayerNorm::new` and `Var::layer_norm` refused a negative or NaN
//!   `eps`, which PyTorch's `nn.LayerNorm(3, eps=-1.0)` and
//!   `F.layer_norm` take (NaN rows where `var + eps` is not positive,
//!   finite ones elsewhere, and the gradients to match).

use strata_autograd::nn::LayerNorm;
use strata_autograd::Var;
use strata_tensor::{Device, Tensor};

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, Device::Cpu).unwrap()).unwrap()
}

#[test]
fn var_and_std_of_a_nan_correction_give_pytorchs_values_and_gradients() {
    // for red in [None, 1]: for f in ['var', 'std']:
    //   x = torch.tensor([[1., 2.], [3., 5.]], requires_grad=True)
    //   y = getattr(x, f)(correction=nan) (or dim=red); y.sum().backward()
    // -> y inf (None) or [inf, inf] (dim=1); x.grad all NaN in every case.
    type Moment = fn(&Var, Option<&[i64]>, f64, bool) -> strata_autograd::Result<Var>;
    let ops: [(&str, Moment); 2] = [("var", Var::var), ("std", Var::std)];
    for (name, op) in ops {
        for dims in [None, Some(&[1i64][..])] {
            let x = param(&[1.0, 2.0, 3.0, 5.0], &[2, 2]);
            let y = op(&x, dims, f64::NAN, false).unwrap();
            let v = y.to_vec::<f32>().unwrap();
            assert!(
                v.iter().all(|&e| e == f32::INFINITY),
                "{name} {dims:?}: {v:?}"
            );
            y.sum(None, false).unwrap().backward().unwrap();
            let g = x.grad().unwrap().to_vec::<f32>().unwrap();
            assert!(g.iter().all(|e| e.is_nan()), "{name} {dims:?}: {g:?}");
        }
    }
}

#[test]
fn layer_norm_takes_a_negative_eps_as_pytorch() {
    // m = torch.nn.LayerNorm(3, eps=-1.0); m(torch.tensor([1., 2., 4.]))
    // -> [-1.7888540, -0.4472134, 2.2360678]
    let m = LayerNorm::new(&[3], -1.0, Device::Cpu).unwrap();
    let y = m.forward(&param(&[1.0, 2.0, 4.0], &[3])).unwrap();
    let y = y.to_vec::<f32>().unwrap();
    for (a, e) in y.iter().zip([-1.788_854, -0.447_213_4, 2.236_067_8]) {
        assert!((a - e).abs() < 1e-5, "{y:?}");
    }
    assert!(LayerNorm::new(&[3], f64::NAN, Device::Cpu).is_ok());
    // x = torch.tensor([[1., 2., 4.], [1., 1., 1.]], requires_grad=True)
    // w, b = torch.tensor([1., 2., 3.]), torch.tensor([0., 1., 0.]) (grad)
    // (F.layer_norm(x, [3], w, b, eps=-0.5) * [[1, -2, .5], [1, 1, 1]]).sum().backward()
    // -> x.grad [[2.4845486, -3.1505108, 0.6659615], [nan] * 3],
    //    w.grad [nan] * 3, b.grad [2., -1., 1.5]
    let x = param(&[1.0, 2.0, 4.0, 1.0, 1.0, 1.0], &[2, 3]);
    let w = param(&[1.0, 2.0, 3.0], &[3]);
    let b = param(&[0.0, 1.0, 0.0], &[3]);
    let dy = Var::new(
        Tensor::from_slice(&[1.0f32, -2., 0.5, 1., 1., 1.], &[2, 3], Device::Cpu).unwrap(),
    );
    x.layer_norm(&[3], Some(&w), Some(&b), -0.5)
        .unwrap()
        .mul(&dy)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let dx = x.grad().unwrap().to_vec::<f32>().unwrap();
    for (a, e) in dx[..3].iter().zip([2.484_548_6, -3.150_510_8, 0.665_961_5]) {
        assert!((a - e).abs() < 1e-5, "{dx:?}");
    }
    assert!(dx[3..].iter().all(|v| v.is_nan()), "{dx:?}");
    let dw = w.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(dw.iter().all(|v| v.is_nan()), "{dw:?}");
    assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), [2.0, -1.0, 1.5]);
}
