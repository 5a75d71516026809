//! Analytic gradients against central finite differences (f64) on random
//! inputs, for every recorded op. The checked function is `sum(f(x) * w)` with
//! a random weight `w`, so every element of every gradient is exercised.

use proptest::prelude::*;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

mod common;
use common::*;

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
    fn addmm_and_linear(m in 1usize..4, k in 1usize..4, n in 1usize..4, case in 0usize..4,
                        seed in any::<u64>()) {
        let sc: Vec<usize> = match case {
            0 => vec![n],
            1 => vec![m, 1],
            2 => vec![],
            _ => vec![m, n],
        };
        gradcheck(
            vec![randn(&sc, seed), randn(&[m, k], seed.wrapping_add(1)), randn(&[k, n], seed.wrapping_add(2))],
            seed,
            |v| v[0].addmm(&v[1], &v[2]),
        );
        // linear with a bias (addmm on the folded input), 3-D input.
        gradcheck(
            vec![randn(&[2, m, k], seed.wrapping_add(3)), randn(&[n, k], seed.wrapping_add(4)),
                 randn(&[n], seed.wrapping_add(5))],
            seed,
            |v| v[0].linear(&v[1], Some(&v[2])),
        );
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

// ---- issue 12: nn, indexing and joining ops (branch nn) ----

/// Random i64 indices in `[0, hi)`.
fn indices(shape: &[usize], hi: usize, seed: u64) -> Tensor {
    let v: Vec<i64> = Tensor::rand(shape, DType::F64, seed, Device::Cpu)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(|u| ((u * hi as f64) as i64).min(hi as i64 - 1))
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn layer_norm_grads(m in 1usize..4, n in 2usize..6, affine in 0usize..3, t in any::<bool>(),
                        seed in any::<u64>()) {
        let x = randn(&[n, m], seed);
        let w = randn(&[n], seed.wrapping_add(1));
        let b = randn(&[n], seed.wrapping_add(2));
        // The op sees a transposed (non-contiguous) input when `t`.
        let xin = |v: &Var| if t { v.transpose(0, 1) } else { v.reshape(&[m as i64, n as i64]) };
        match affine {
            0 => gradcheck(vec![x], seed, |v| xin(&v[0])?.layer_norm(&[n], None, None, 1e-5)),
            1 => gradcheck(vec![x, w], seed, |v| xin(&v[0])?.layer_norm(&[n], Some(&v[1]), None, 1e-5)),
            _ => gradcheck(vec![x, w, b], seed, |v| {
                xin(&v[0])?.layer_norm(&[n], Some(&v[1]), Some(&v[2]), 1e-3)
            }),
        }
    }

    #[test]
    fn cross_entropy_grads(n in 1usize..5, c in 2usize..6, red in 0usize..3, smooth in any::<bool>(),
                           weighted in any::<bool>(), seed in any::<u64>()) {
        let x = randn(&[c, n], seed);
        let mut t = indices(&[n], c, seed.wrapping_add(1)).to_vec::<i64>().unwrap();
        if n > 1 { t[0] = -100; } // one ignored row
        let t = Tensor::from_vec(t, &[n], Device::Cpu).unwrap();
        let w = rand_map(&[c], seed.wrapping_add(2), positive);
        let reduction = [strata_tensor::Reduction::None, strata_tensor::Reduction::Sum,
                         strata_tensor::Reduction::Mean][red];
        let args = strata_tensor::CrossEntropyArgs {
            weight: if weighted { Some(&w) } else { None },
            ignore_index: -100,
            reduction,
            label_smoothing: if smooth { 0.2 } else { 0.0 },
        };
        gradcheck(vec![x], seed, |v| v[0].transpose(0, 1)?.cross_entropy(&t, args));
    }

    #[test]
    fn cross_entropy_spatial_and_probabilities(n in 1usize..3, c in 2usize..4, d in 1usize..3,
                                               seed in any::<u64>()) {
        let x = randn(&[n, c, d], seed);
        let t = indices(&[n, d], c, seed.wrapping_add(1));
        gradcheck(vec![x.clone()], seed, |v| v[0].cross_entropy(&t, Default::default()));
        let p = rand_map(&[n, c, d], seed.wrapping_add(3), positive);
        let args = strata_tensor::CrossEntropyArgs { label_smoothing: 0.1, ..Default::default() };
        gradcheck(vec![x], seed, |v| v[0].cross_entropy(&p, args));
    }

    #[test]
    fn nll_and_mse_grads(n in 1usize..5, c in 2usize..5, red in 0usize..3, seed in any::<u64>()) {
        let reduction = [strata_tensor::Reduction::None, strata_tensor::Reduction::Sum,
                         strata_tensor::Reduction::Mean][red];
        let x = randn(&[n, c], seed);
        let t = indices(&[n], c, seed.wrapping_add(1));
        let w = rand_map(&[c], seed.wrapping_add(2), positive);
        // Class 1 is ignored, except under the mean (all ignored is 0/0 there).
        let ignore = if red == 2 { -100 } else { 1 };
        gradcheck(vec![x.clone()], seed, |v| v[0].nll_loss(&t, Some(&w), ignore, reduction));
        let y = randn(&[c], seed.wrapping_add(3));
        gradcheck(vec![x.clone(), y], seed, |v| v[0].mse_loss(&v[1], reduction, None));
        let y2 = randn(&[n, c], seed.wrapping_add(4));
        let mw = rand_map(&[c, n], seed.wrapping_add(5), positive).t().unwrap();
        gradcheck(vec![x, y2], seed, |v| v[0].mse_loss(&v[1].t()?.t()?, reduction, Some(&mw)));
    }

    #[test]
    fn index_grads(m in 1usize..4, n in 1usize..4, k in 1usize..5, seed in any::<u64>()) {
        let a = randn(&[n, m], seed);
        let i = indices(&[k], n, seed.wrapping_add(1));
        // Non-contiguous input (a transpose), repeated indices accumulate.
        gradcheck(vec![a.clone()], seed, |v| v[0].transpose(0, 1)?.index_select(1, &i));
        gradcheck(vec![a.clone()], seed, |v| v[0].index_select(0, &i));
        let gi = indices(&[m, k], n, seed.wrapping_add(2));
        gradcheck(vec![a.clone()], seed, |v| v[0].transpose(0, 1)?.gather(1, &gi));
        let src = randn(&[m, k], seed.wrapping_add(3));
        gradcheck(vec![a.clone(), src], seed, |v| v[0].transpose(0, 1)?.scatter_add(1, &gi, &v[1]));
        let e = indices(&[2, k], n, seed.wrapping_add(4));
        gradcheck(vec![a.clone()], seed, |v| v[0].embedding(&e, None));
        // padding_idx: that row gets no gradient (PyTorch's rule, not the
        // true derivative), the others the same as without it.
        let w = Var::parameter(a.deep_clone().unwrap()).unwrap();
        let plain = Var::parameter(a.deep_clone().unwrap()).unwrap();
        w.embedding(&e, Some(0)).unwrap().sum(None, false).unwrap().backward().unwrap();
        plain.embedding(&e, None).unwrap().sum(None, false).unwrap().backward().unwrap();
        let (gw, gp) = (w.grad().unwrap(), plain.grad().unwrap());
        prop_assert!(gw.narrow(0, 0, 1).unwrap().to_vec::<f64>().unwrap().iter().all(|&x| x == 0.0));
        prop_assert_eq!(gw.narrow(0, 1, n as i64 - 1).unwrap().to_vec::<f64>().unwrap(),
                        gp.narrow(0, 1, n as i64 - 1).unwrap().to_vec::<f64>().unwrap());
        let mask = randn(&[m], seed.wrapping_add(5)).gt(0.0).unwrap();
        gradcheck(vec![a.clone()], seed, |v| v[0].masked_fill(&mask, 1.5));
        let b = randn(&[m], seed.wrapping_add(6));
        let cond = randn(&[n, m], seed.wrapping_add(7)).gt(0.0).unwrap();
        gradcheck(vec![a.clone(), b], seed, |v| Var::where_cond(&cond, &v[0], &v[1]));
        gradcheck(vec![a.clone()], seed, |v| v[0].triu(0));
        gradcheck(vec![a], seed, |v| v[0].transpose(0, 1)?.tril(-1));
    }

    #[test]
    fn join_grads(m in 1usize..4, n in 1usize..4, p in 1usize..4, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        let b = randn(&[p, n], seed.wrapping_add(1));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| Var::cat(&[&v[0], &v[1], &v[0]], 0));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| {
            Var::cat(&[&v[0].t()?, &v[1].t()?], 1)
        });
        let c = randn(&[m, n], seed.wrapping_add(2));
        gradcheck(vec![a.clone(), c], seed, |v| Var::stack(&[&v[0], &v[1]], 1));
        gradcheck(vec![b.clone()], seed, |v| {
            let parts = v[0].split(2, 0)?;
            let refs: Vec<&Var> = parts.iter().rev().collect();
            Var::cat(&refs, 0)?.mul(&v[0].sum(None, true)?)
        });
        gradcheck(vec![b], seed, |v| {
            let parts = v[0].t()?.chunk(2, 1)?;
            parts[0].exp()?.sum(Some(&[1]), false)
        });
    }
}

#[test]
fn dropout_mask_is_regenerated_and_the_generator_advances() {
    strata_autograd::manual_seed(11);
    let x = Var::parameter(Tensor::ones(&[64, 32], DType::F64, Device::Cpu).unwrap()).unwrap();
    let y = x.dropout(0.25, true).unwrap();
    assert_eq!(strata_autograd::generator_state(), (11, 1));
    // Nothing is saved: the mask comes back from the seed.
    assert_eq!(y.saved_bytes(), 0);
    y.sum(None, false).unwrap().backward().unwrap();
    let out = y.data().to_vec::<f64>().unwrap();
    let g = x.grad().unwrap().to_vec::<f64>().unwrap();
    // The gradient is the same mask and scale as the output.
    assert_eq!(out, g);
    let kept = out.iter().filter(|&&v| v != 0.0).count();
    assert!(out
        .iter()
        .all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-12));
    assert!((kept as f64 / 2048.0 - 0.75).abs() < 0.05, "kept {kept}");
    // A second call draws a different mask; reseeding repeats the first.
    let y2 = x.dropout(0.25, true).unwrap();
    assert_ne!(y2.data().to_vec::<f64>().unwrap(), out);
    strata_autograd::manual_seed(11);
    let y3 = x.dropout(0.25, true).unwrap();
    assert_eq!(y3.data().to_vec::<f64>().unwrap(), out);
    // Eval mode is the identity.
    let e = x.dropout(0.25, false).unwrap();
    assert!(e.data().same_storage(x.data()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// masked_select: plain, with the mask broadcast (a row mask, a column
    /// mask), with self broadcast (its gradient sums over the aliases), and
    /// on a transposed (non-contiguous) input.
    #[test]
    fn masked_select_grads(m in 1usize..5, n in 1usize..5, seed in any::<u64>()) {
        let a = randn(&[n, m], seed);
        let full = randn(&[n, m], seed.wrapping_add(1)).gt(0.0).unwrap();
        gradcheck(vec![a.clone()], seed, |v| v[0].masked_select(&full));
        let row = randn(&[m], seed.wrapping_add(2)).gt(0.0).unwrap();
        gradcheck(vec![a.clone()], seed, |v| v[0].masked_select(&row));
        let col = randn(&[n, 1], seed.wrapping_add(3)).gt(-0.5).unwrap();
        gradcheck(vec![a.clone()], seed, |v| v[0].masked_select(&col));
        let b = randn(&[m], seed.wrapping_add(4));
        gradcheck(vec![b], seed, |v| v[0].masked_select(&full));
        let at = randn(&[m, n], seed.wrapping_add(5));
        gradcheck(vec![at], seed, |v| v[0].t()?.masked_select(&full));
    }
}
