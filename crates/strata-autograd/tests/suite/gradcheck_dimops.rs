//! Analytic gradients of var, std and logsumexp against central finite
//! differences (f64) on random inputs, dims, corrections and layouts (the
//! same check as `gradcheck.rs`: `sum(f(x) * w)` with a random weight `w`).

use proptest::prelude::*;
use strata_autograd::Var;

use crate::common;
use common::*;

/// The dims of a `[m, n, p]` input that case `which` reduces.
fn dims_of(which: usize) -> Option<Vec<i64>> {
    match which {
        0 => None,
        1 => Some(vec![0]),
        2 => Some(vec![1]),
        3 => Some(vec![-1]),
        4 => Some(vec![0, 2]),
        _ => Some(vec![2, 0, 1]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every reduced dim has at least 2 elements, so `N - correction > 0`
    /// and the standard deviation is away from 0 (where its gradient is not
    /// defined).
    #[test]
    fn var_and_std(m in 2usize..4, n in 2usize..4, p in 2usize..4, which in 0usize..6,
                   corr in 0usize..3, keepdim in any::<bool>(), transposed in any::<bool>(),
                   seed in any::<u64>()) {
        let correction = [0.0, 1.0, 0.5][corr];
        let a = randn(&[m, n, p], seed);
        let d = dims_of(which);
        let d2 = d.clone();
        // Transposed: the same dims of a non-contiguous view.
        let view = move |v: &Var| if transposed { v.transpose(0, 2) } else { Ok(v.clone()) };
        gradcheck(vec![a.clone()], seed, move |v| {
            view(&v[0])?.var(d.as_deref(), correction, keepdim)
        });
        gradcheck(vec![a], seed, move |v| {
            view(&v[0])?.std(d2.as_deref(), correction, keepdim)
        });
    }

    #[test]
    fn logsumexp(m in 1usize..4, n in 1usize..4, p in 1usize..4, which in 0usize..6,
                 keepdim in any::<bool>(), transposed in any::<bool>(), shift in -50.0f64..50.0,
                 seed in any::<u64>()) {
        // A large common shift checks the max-subtracted form's gradient too.
        let a = randn(&[m, n, p], seed).add(shift).unwrap();
        let dims = dims_of(which).unwrap_or_default();
        let keep = keepdim || dims.is_empty();
        gradcheck(vec![a], seed, move |v| {
            let x = if transposed { v[0].transpose(0, 1)? } else { v[0].clone() };
            x.logsumexp(&dims, keep)
        });
    }

    /// The forward values against a direct f64 computation.
    #[test]
    fn forward_values(m in 1usize..5, n in 2usize..5, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        let v = a.to_vec::<f64>().unwrap();
        let x = Var::new(a);
        let var = x.var(Some(&[1]), 1.0, false).unwrap().data().to_vec::<f64>().unwrap();
        let std = x.std(Some(&[1]), 0.0, false).unwrap().data().to_vec::<f64>().unwrap();
        let lse = x.logsumexp(&[1], false).unwrap().data().to_vec::<f64>().unwrap();
        for r in 0..m {
            let row = &v[r * n..(r + 1) * n];
            let mean = row.iter().sum::<f64>() / n as f64;
            let ss: f64 = row.iter().map(|x| (x - mean) * (x - mean)).sum();
            prop_assert!((var[r] - ss / (n as f64 - 1.0)).abs() <= 1e-12 * (1.0 + var[r].abs()));
            prop_assert!((std[r] - (ss / n as f64).sqrt()).abs() <= 1e-12 * (1.0 + std[r].abs()));
            let l = row.iter().map(|x| x.exp()).sum::<f64>().ln();
            prop_assert!((lse[r] - l).abs() <= 1e-12 * (1.0 + l.abs()));
        }
    }
}
