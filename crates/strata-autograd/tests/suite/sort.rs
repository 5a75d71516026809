//! Gradients of `sort`, `msort`, `topk`, `kthvalue`, `median`/`nanmedian`
//! (session 60): against PyTorch 2.15's gradients (literals computed in the
//! venv with `(y * w).sum().backward()`, `w = 1, 2, 3, ...` in the result's
//! row-major order, f64, one thread; inputs without ties where PyTorch's
//! index among ties is unspecified) and against central finite differences
//! in f64 on random shapes, dims and layouts.

use proptest::prelude::*;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, Tensor};

use crate::common;
use common::*;

/// `x`'s gradient of `sum(f(x) * w)`, `w = 1, 2, ...` (f64), and f's values.
fn grad_of(x: &[f64], shape: &[usize], f: impl Fn(&Var) -> Result<Var>) -> (Vec<f64>, Vec<f64>) {
    let t = Tensor::from_slice(x, shape, Device::Cpu).unwrap();
    let v = Var::parameter(t).unwrap();
    let y = f(&v).unwrap();
    let n = y.data().numel();
    let w: Vec<f64> = (1..=n).map(|i| i as f64).collect();
    let w = Tensor::from_slice(&w, y.shape(), Device::Cpu).unwrap();
    y.mul(&Var::new(w))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let vals = y.data().contiguous().unwrap().to_vec::<f64>().unwrap();
    (vals, v.grad().unwrap().to_vec::<f64>().unwrap())
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

#[test]
fn gradients_are_pytorchs() {
    let nan = f64::NAN;
    type F = Box<dyn Fn(&Var) -> Result<Var>>;
    // (what, input, shape, op, PyTorch's values, PyTorch's gradient)
    type Case = (&'static str, Vec<f64>, Vec<usize>, F, Vec<f64>, Vec<f64>);
    let cases: Vec<Case> = vec![
        (
            "sort dim 1 descending (ties)",
            vec![3., 1., 2., 1., 0., 5., 5., -1.],
            vec![2, 4],
            Box::new(|x| Ok(x.sort(1, true, true)?.0)),
            vec![3., 2., 1., 1., 5., 5., 0., -1.],
            vec![1., 3., 2., 4., 7., 5., 6., 8.],
        ),
        (
            "sort dim 0 (ties)",
            vec![3., 1., 2., 1., 0., 5.],
            vec![3, 2],
            Box::new(|x| Ok(x.sort(0, false, true)?.0)),
            vec![0., 1., 2., 1., 3., 5.],
            vec![5., 2., 3., 4., 1., 6.],
        ),
        (
            "msort",
            vec![3., 1., 2., 1., 0., 5.],
            vec![3, 2],
            Box::new(|x| x.msort()),
            vec![0., 1., 2., 1., 3., 5.],
            vec![5., 2., 3., 4., 1., 6.],
        ),
        (
            "topk 2 dim 0",
            vec![3., 1., 2., 7., 0., 5.],
            vec![3, 2],
            Box::new(|x| Ok(x.topk(2, 0, true, true)?.0)),
            vec![3., 7., 2., 5.],
            vec![1., 0., 3., 2., 0., 4.],
        ),
        (
            "topk 2 dim 1 smallest",
            vec![3., 1., 4., 1.5, 2., 7., -1., 0.],
            vec![2, 4],
            Box::new(|x| Ok(x.topk(2, 1, false, true)?.0)),
            vec![1., 1.5, -1., 0.],
            vec![0., 1., 0., 2., 0., 0., 3., 4.],
        ),
        (
            "kthvalue 2 dim 1",
            vec![3., 1., 4., 1.5, 2., 7., -1., 0.],
            vec![2, 4],
            Box::new(|x| Ok(x.kthvalue(2, 1, false)?.0)),
            vec![1.5, 0.],
            vec![0., 0., 0., 1., 0., 0., 0., 2.],
        ),
        (
            "median dim 1 keepdim, a NaN",
            vec![3., 1., 4., 1.5, 2., nan, -1., 0.],
            vec![2, 4],
            Box::new(|x| Ok(x.median_dim(1, true)?.0)),
            vec![1.5, nan],
            vec![0., 0., 0., 1., 0., 2., 0., 0.],
        ),
        (
            "nanmedian dim 1, a NaN",
            vec![3., 1., 4., 1.5, 2., nan, -1., 0.],
            vec![2, 4],
            Box::new(|x| Ok(x.nanmedian_dim(1, false)?.0)),
            vec![1.5, 0.],
            vec![0., 0., 0., 1., 0., 0., 0., 2.],
        ),
        (
            "median of all, zeros of both signs tie",
            vec![0., -0., 1., -1., 0.],
            vec![5],
            Box::new(|x| x.median()),
            vec![0.],
            vec![1. / 3., 1. / 3., 0., 0., 1. / 3.],
        ),
        (
            "nanmedian of all",
            vec![nan, 2., 2., 1.],
            vec![4],
            Box::new(|x| x.nanmedian()),
            vec![2.],
            vec![0., 0.5, 0.5, 0.],
        ),
        (
            "median of all, NaN",
            vec![nan, 2., nan, 1.],
            vec![4],
            Box::new(|x| x.median()),
            vec![nan],
            vec![0.5, 0., 0.5, 0.],
        ),
    ];
    for (what, x, shape, f, want_v, want_g) in cases {
        let (v, g) = grad_of(&x, &shape, f);
        assert!(same(&v, &want_v), "{what}: values {v:?}, want {want_v:?}");
        assert!(same(&g, &want_g), "{what}: gradient {g:?}, want {want_g:?}");
    }
}

#[test]
fn indices_have_no_gradient_and_errors_are_typed() {
    let x = Var::parameter(Tensor::from_slice(&[2.0f32, 1.0], &[2], Device::Cpu).unwrap()).unwrap();
    let (_, i) = x.sort(0, false, false).unwrap();
    assert_eq!(i.dtype(), DType::I64);
    assert!(x.topk(3, 0, true, true).is_err());
    assert!(x.kthvalue(0, 0, false).is_err());
    assert!(x.median_dim(1, false).is_err());
    assert!(x.sort(2, false, false).is_err());
    // Nothing was recorded or accumulated by the failures.
    assert!(x.grad().is_none());
    // A 0-d input passes its gradient through.
    let s = Var::parameter(Tensor::scalar(3.0f64, DType::F64, Device::Cpu).unwrap()).unwrap();
    s.kthvalue(1, 0, false).unwrap().0.backward().unwrap();
    assert_eq!(s.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn gradients_match_finite_differences(m in 1usize..4, n in 2usize..6, p in 1usize..4,
                                          dim in 0i64..3, transposed in any::<bool>(),
                                          desc in any::<bool>(), keepdim in any::<bool>(),
                                          kfrac in 0.0f64..1.0, seed in any::<u64>()) {
        // Random normal values: distinct, and no perturbation of 1e-6
        // reorders them (in practice).
        let a = randn(&[m, n, p], seed);
        let size = [m, n, p][dim as usize];
        let k = ((size as f64 * kfrac) as usize).max(1);
        let view = move |v: &Var| if transposed { v.transpose(0, 2) } else { Ok(v.clone()) };
        let d = if transposed { 2 - dim } else { dim };
        gradcheck(vec![a.clone()], seed, move |v| Ok(view(&v[0])?.sort(d, desc, false)?.0));
        gradcheck(vec![a.clone()], seed, move |v| Ok(view(&v[0])?.topk(k, d, desc, true)?.0));
        gradcheck(vec![a.clone()], seed, move |v| Ok(view(&v[0])?.kthvalue(k, d, keepdim)?.0));
        gradcheck(vec![a.clone()], seed, move |v| Ok(view(&v[0])?.median_dim(d, keepdim)?.0));
        gradcheck(vec![a.clone()], seed, move |v| Ok(view(&v[0])?.nanmedian_dim(d, keepdim)?.0));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.median());
        gradcheck(vec![a], seed, move |v| view(&v[0])?.msort());
    }
}
