//! Analytic gradients against central finite differences (f64) on random
//! inputs, for every recorded op. The checked function is `sum(f(x) * w)` with
//! a random weight `w`, so every element of every gradient is exercised.

use proptest::prelude::*;
use strata_autograd::{no_grad, Result, Var};
use strata_tensor::{DType, Device, Tensor};

const EPS: f64 = 1e-6;

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, seed, Device::Cpu).unwrap()
}

/// Random values mapped by `f` (to keep inputs away from kinks and poles).
fn rand_map(shape: &[usize], seed: u64, f: impl Fn(f64) -> f64) -> Tensor {
    let v: Vec<f64> = randn(shape, seed)
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(f)
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu).unwrap()
}

fn away_from_zero(x: f64) -> f64 {
    x + 0.2 * x.signum()
}

fn positive(x: f64) -> f64 {
    x.abs() + 0.5
}

/// `sum(out * w)` as an f64.
fn weighted(out: &Tensor, w: &Tensor) -> f64 {
    out.to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(w.to_vec::<f64>().unwrap())
        .map(|(a, b)| a * b)
        .sum()
}

/// Checks the gradients of `f` at `inputs` against finite differences.
fn gradcheck(inputs: Vec<Tensor>, seed: u64, f: impl Fn(&[Var]) -> Result<Var>) {
    let inputs = &inputs[..];
    let vars: Vec<Var> = inputs
        .iter()
        .map(|t| Var::parameter(t.deep_clone().unwrap()).unwrap())
        .collect();
    let out = f(&vars).unwrap();
    assert!(out.requires_grad(), "output must require grad");
    let w = randn(out.shape(), seed ^ 0x5eed);
    let loss = out
        .mul(&Var::new(w.clone()))
        .unwrap()
        .sum(None, false)
        .unwrap();
    loss.backward().unwrap();
    for (i, x) in inputs.iter().enumerate() {
        let analytic = vars[i].grad().expect("a gradient for every input");
        assert_eq!(analytic.shape(), x.shape(), "gradient shape of input {i}");
        let analytic = analytic.to_vec::<f64>().unwrap();
        let base = x.to_vec::<f64>().unwrap();
        for j in 0..base.len() {
            let eval = |delta: f64| -> f64 {
                let mut v = base.clone();
                v[j] += delta;
                let mut args: Vec<Var> = inputs
                    .iter()
                    .map(|t| Var::new(t.deep_clone().unwrap()))
                    .collect();
                args[i] = Var::new(Tensor::from_vec(v, x.shape(), Device::Cpu).unwrap());
                let out = no_grad(|| f(&args)).unwrap();
                weighted(out.data(), &w)
            };
            let numeric = (eval(EPS) - eval(-EPS)) / (2.0 * EPS);
            let a = analytic[j];
            assert!(
                (a - numeric).abs() <= 1e-5 + 1e-5 * numeric.abs(),
                "input {i} element {j}: analytic {a} vs numeric {numeric}"
            );
        }
    }
}

/// Shapes that broadcast against `[m, n]`.
fn partner_shape(m: usize, n: usize, k: usize) -> Vec<usize> {
    match k {
        0 => vec![m, n],
        1 => vec![n],
        2 => vec![m, 1],
        3 => vec![1, n],
        4 => vec![],
        _ => vec![2, m, n], // broadcasts the other way: [m, n] against [2, m, n]
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn add_sub_broadcast(m in 1usize..4, n in 1usize..4, k in 0usize..6, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        let b = randn(&partner_shape(m, n, k), seed.wrapping_add(1));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].add(&v[1]));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].sub(&v[1]));
        gradcheck(vec![b, a], seed, |v| v[0].sub(&v[1]));
    }

    #[test]
    fn mul_div_broadcast(m in 1usize..4, n in 1usize..4, k in 0usize..6, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        let b = rand_map(&partner_shape(m, n, k), seed.wrapping_add(1), positive);
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].mul(&v[1]));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].div(&v[1]));
        let a_pos = rand_map(&[m, n], seed.wrapping_add(2), positive);
        gradcheck(vec![b, a_pos], seed, |v| v[0].div(&v[1]));
        // The same variable on both sides: both gradients accumulate.
        gradcheck(vec![a], seed, |v| v[0].mul(&v[0]));
    }

    #[test]
    fn scalar_operands(m in 1usize..4, n in 1usize..4, c in -3.0f64..3.0, seed in any::<u64>()) {
        let c = away_from_zero(c);
        let a = randn(&[m, n], seed);
        gradcheck(vec![a.clone()], seed, |v| v[0].add(c));
        gradcheck(vec![a.clone()], seed, |v| v[0].sub(c));
        gradcheck(vec![a.clone()], seed, |v| v[0].mul(c));
        gradcheck(vec![a.clone()], seed, |v| v[0].div(c));
        gradcheck(vec![a], seed, |v| v[0].rsub(c));
    }

    #[test]
    fn unary(m in 1usize..4, n in 1usize..5, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        gradcheck(vec![a.clone()], seed, |v| v[0].neg());
        gradcheck(vec![a.clone()], seed, |v| v[0].exp());
        gradcheck(vec![rand_map(&[m, n], seed, positive)], seed, |v| v[0].log());
        gradcheck(vec![rand_map(&[m, n], seed, away_from_zero)], seed, |v| v[0].relu());
        // Composition: the gradient flows through several nodes and a shared input.
        gradcheck(vec![a], seed, |v| v[0].relu()?.add(&v[0].exp()?)?.mul(&v[0]));
    }

    #[test]
    fn reductions(m in 1usize..4, n in 1usize..4, p in 1usize..4, which in 0usize..6,
                  keepdim in any::<bool>(), seed in any::<u64>()) {
        let dims: Option<Vec<i64>> = match which {
            0 => None,
            1 => Some(vec![0]),
            2 => Some(vec![1]),
            3 => Some(vec![-1]),
            4 => Some(vec![0, 2]),
            _ => Some(vec![2, 0, 1]),
        };
        let a = randn(&[m, n, p], seed);
        let d = dims.clone();
        gradcheck(vec![a.clone()], seed, move |v| v[0].sum(d.as_deref(), keepdim));
        gradcheck(vec![a], seed, move |v| v[0].mean(dims.as_deref(), keepdim));
    }

    #[test]
    fn matmul(m in 1usize..4, k in 1usize..4, n in 1usize..4, b in 1usize..3, case in 0usize..7,
              seed in any::<u64>()) {
        let (sa, sb): (Vec<usize>, Vec<usize>) = match case {
            0 => (vec![m, k], vec![k, n]),
            1 => (vec![k], vec![k, n]),
            2 => (vec![m, k], vec![k]),
            3 => (vec![k], vec![k]),
            4 => (vec![b, m, k], vec![k, n]),
            5 => (vec![b, m, k], vec![1, k, n]),
            _ => (vec![k], vec![b, k, n]),
        };
        gradcheck(vec![randn(&sa, seed), randn(&sb, seed.wrapping_add(1))], seed, |v| v[0].matmul(&v[1]));
    }

    #[test]
    fn views(m in 1usize..4, n in 1usize..4, p in 1usize..4, seed in any::<u64>()) {
        let a = randn(&[m, n, p], seed);
        gradcheck(vec![a.clone()], seed, |v| v[0].transpose(0, 2));
        gradcheck(vec![a.clone()], seed, |v| v[0].transpose(-1, 1)?.reshape(&[-1]));
        gradcheck(vec![a.clone()], seed, |v| v[0].reshape(&[(m * n) as i64, p as i64]));
        gradcheck(vec![a.clone()], seed, |v| v[0].permute(&[2, 0, 1]));
        gradcheck(vec![a.clone()], seed, |v| v[0].unsqueeze(1)?.flatten(0, 1));
        gradcheck(vec![a.clone()], seed, |v| v[0].view(&[-1]));
        let len = (n as i64).max(2) - 1;
        gradcheck(vec![a.clone()], seed, move |v| v[0].narrow(1, n as i64 - len, len));
        gradcheck(vec![a.clone()], seed, move |v| v[0].narrow(2, 0, 1)?.squeeze_dims(&[2]));
        // Non-linear after a view, so the mapped-back gradient is not just w.
        gradcheck(vec![a], seed, |v| v[0].transpose(0, 1)?.exp());
        let col = randn(&[m, 1], seed.wrapping_add(3));
        gradcheck(vec![col], seed, move |v| v[0].expand(&[3, m as i64, n as i64]));
        let t = randn(&[m, n], seed.wrapping_add(4));
        gradcheck(vec![t], seed, |v| v[0].t()?.matmul(&v[0]));
    }

    #[test]
    fn mlp_like(bsz in 1usize..4, i in 1usize..4, h in 1usize..4, seed in any::<u64>()) {
        let x = randn(&[bsz, i], seed);
        let w1 = randn(&[i, h], seed.wrapping_add(1));
        let b1 = rand_map(&[h], seed.wrapping_add(2), away_from_zero);
        let w2 = randn(&[h, 1], seed.wrapping_add(3));
        let y = randn(&[bsz, 1], seed.wrapping_add(4));
        gradcheck(vec![x, w1, b1, w2, y], seed, |v| {
            let hdn = v[0].matmul(&v[1])?.add(&v[2])?.relu()?;
            let d = hdn.matmul(&v[3])?.sub(&v[4])?;
            d.mul(&d)?.mean(None, false)
        });
    }

    #[test]
    fn inplace_on_non_leaf(m in 1usize..4, n in 1usize..4, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        let b = rand_map(&[n], seed.wrapping_add(1), positive);
        gradcheck(vec![a.clone(), b.clone()], seed, |v| {
            let y = v[0].mul(2.0)?;
            y.add_(&v[1])?.mul_(&v[1])?.div_(&v[1])?.sub_(&v[0])?.mul_(3.0)?;
            Ok(y)
        });
        gradcheck(vec![a.clone(), b], seed, |v| {
            let y = v[0].exp()?.mul(1.0)?;
            y.div_(&v[1])?;
            Ok(y)
        });
        // The other operand is self: its old value must be kept for the gradient.
        gradcheck(vec![a.clone()], seed, |v| {
            let y = v[0].add(0.5)?;
            y.mul_(&y)?;
            Ok(y)
        });
        gradcheck(vec![a], seed, |v| {
            let y = v[0].exp()?.add(1.0)?;
            y.add_(&y)?.mul_(&y)?.div_(&v[0].exp()?.add(2.0)?)?;
            Ok(y)
        });
    }
}
