//! Session 44's sweep of hostile inputs to strata-autograd. Every expected
//! value is PyTorch 2.15's (CPU), with the Python beside each test.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Var::var` and `Var::std` with a NaN correction were refused (the
//!   tensor op's value error); PyTorch returns +inf (its divisor
//!   `max(0, N - NaN)` is 0) and its backward, `2 / (N - NaN) * g * (x -
//!   mean)`, gives NaN gradients. strata now gives both.

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
