//! Gradients of session 60's shape ops (`flip`, `roll`, `repeat`, `tile`,
//! `repeat_interleave`, `pad`) and of `clamp_tensor`: against PyTorch
//! 2.15's gradients (literals printed by the venv's PyTorch, CPU, f64:
//! `x = arange(n).reshape(shape)`, loss `sum(f(x) * arange(1, m + 1))`; the
//! clamp tables are `torch.clamp(x, min, max).backward(1)` for every
//! combination of 0, 1, 2 and NaN), and against central finite differences
//! in f64 on random shapes and layouts (`common::gradcheck`).

use proptest::prelude::*;
const NAN: f64 = f64::NAN;
use strata_autograd::Var;
use strata_tensor::{DType, Device, PadMode, Tensor};

use crate::common;
use common::*;

fn arange_var(shape: &[usize]) -> Var {
    let n: usize = shape.iter().product();
    let dims: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    let t = Tensor::arange(0i64, n as i64, 1i64, Some(DType::F64), Device::Cpu)
        .unwrap()
        .reshape(&dims)
        .unwrap();
    Var::parameter(t).unwrap()
}

/// The gradient of `sum(f(x) * arange(1, m + 1))` for `x = arange(n)`.
fn grad_of(shape: &[usize], f: impl Fn(&Var) -> strata_autograd::Result<Var>) -> Vec<f64> {
    let x = arange_var(shape);
    let y = f(&x).unwrap();
    let m = y.numel();
    let dims: Vec<i64> = y.shape().iter().map(|&s| s as i64).collect();
    let w = Tensor::arange(1i64, m as i64 + 1, 1i64, Some(DType::F64), Device::Cpu)
        .unwrap()
        .reshape(&dims)
        .unwrap();
    y.mul(&Var::new(w))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    x.grad().unwrap().to_vec::<f64>().unwrap()
}

/// A named op, its input's shape, the op and PyTorch's gradient.
type Case = (
    &'static str,
    Vec<usize>,
    Box<dyn Fn(&Var) -> strata_autograd::Result<Var>>,
    Vec<f64>,
);

#[test]
fn gradients_match_pytorch() {
    let cases: Vec<Case> = vec![
        (
            "pad_reflect",
            vec![1, 4],
            Box::new(|x| x.pad(&[3, 2], PadMode::Reflect)),
            vec![4.0, 17.0, 16.0, 8.0],
        ),
        (
            "pad_replicate",
            vec![1, 2, 3],
            Box::new(|x| x.pad(&[2, -1, 1, 3], PadMode::Replicate)),
            vec![24.0, 12.0, 0.0, 192.0, 72.0, 0.0],
        ),
        (
            "pad_circular",
            vec![1, 3, 4],
            Box::new(|x| x.pad(&[-1, 2, 2, 1], PadMode::Circular)),
            vec![
                0.0, 80.0, 84.0, 41.0, 0.0, 40.0, 44.0, 21.0, 0.0, 60.0, 64.0, 31.0,
            ],
        ),
        (
            "pad_constant",
            vec![2, 3],
            Box::new(|x| x.pad(&[1, -1, -1, 2], PadMode::Constant(0.0.into()))),
            vec![0.0, 0.0, 0.0, 2.0, 3.0, 0.0],
        ),
        (
            "repeat",
            vec![2, 2],
            Box::new(|x| x.repeat(&[2, 1, 3])),
            vec![54.0, 60.0, 90.0, 96.0],
        ),
        (
            "tile",
            vec![2, 3],
            Box::new(|x| x.tile(&[2])),
            vec![5.0, 7.0, 9.0, 17.0, 19.0, 21.0],
        ),
        (
            "ri",
            vec![2, 2],
            Box::new(|x| x.repeat_interleave(3, Some(1))),
            vec![6.0, 15.0, 24.0, 33.0],
        ),
        (
            "ri_none",
            vec![2, 2],
            Box::new(|x| x.repeat_interleave(2, None)),
            vec![3.0, 7.0, 11.0, 15.0],
        ),
        (
            "ri_t",
            vec![2, 3],
            Box::new(|x| {
                let counts = Tensor::from_slice(&[2i64, 0, 1], &[3], Device::Cpu)?;
                x.repeat_interleave(&counts, Some(1))
            }),
            vec![3.0, 0.0, 3.0, 9.0, 0.0, 6.0],
        ),
        (
            "roll",
            vec![2, 3],
            Box::new(|x| x.roll(&[1, -4], &[0, 1])),
            vec![6.0, 4.0, 5.0, 3.0, 1.0, 2.0],
        ),
        (
            "roll_flat",
            vec![2, 3],
            Box::new(|x| x.roll(&[2], &[])),
            vec![3.0, 4.0, 5.0, 6.0, 1.0, 2.0],
        ),
        (
            "flip",
            vec![2, 3],
            Box::new(|x| x.flip(&[0, 1])),
            vec![6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        ),
    ];
    for (name, shape, f, want) in cases {
        assert_eq!(grad_of(&shape, f), want, "{name}");
    }
}

const CLAMP_BOTH: [[f64; 6]; 64] = [
    [0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.5, 0.5, 0.0],
    [0.0, 0.0, 2.0, 0.5, 0.5, 0.0],
    [0.0, 0.0, NAN, 1.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    [0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
    [0.0, 1.0, 2.0, 0.0, 1.0, 0.0],
    [0.0, 1.0, NAN, 0.0, 0.0, 0.0],
    [0.0, 2.0, 0.0, 0.0, 0.0, 1.0],
    [0.0, 2.0, 1.0, 0.0, 0.0, 1.0],
    [0.0, 2.0, 2.0, 0.0, 1.0, 0.0],
    [0.0, 2.0, NAN, 0.0, 0.0, 0.0],
    [0.0, NAN, 0.0, 1.0, 0.0, 0.0],
    [0.0, NAN, 1.0, 1.0, 0.0, 0.0],
    [0.0, NAN, 2.0, 1.0, 0.0, 0.0],
    [0.0, NAN, NAN, 1.0, 0.0, 0.0],
    [1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    [1.0, 0.0, 1.0, 0.5, 0.0, 0.5],
    [1.0, 0.0, 2.0, 1.0, 0.0, 0.0],
    [1.0, 0.0, NAN, 1.0, 0.0, 0.0],
    [1.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
    [1.0, 1.0, 2.0, 0.5, 0.5, 0.0],
    [1.0, 1.0, NAN, 1.0, 0.0, 0.0],
    [1.0, 2.0, 0.0, 0.0, 0.0, 1.0],
    [1.0, 2.0, 1.0, 0.0, 0.0, 1.0],
    [1.0, 2.0, 2.0, 0.0, 1.0, 0.0],
    [1.0, 2.0, NAN, 0.0, 0.0, 0.0],
    [1.0, NAN, 0.0, 0.0, 0.0, 0.0],
    [1.0, NAN, 1.0, 1.0, 0.0, 0.0],
    [1.0, NAN, 2.0, 1.0, 0.0, 0.0],
    [1.0, NAN, NAN, 1.0, 0.0, 0.0],
    [2.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    [2.0, 0.0, 1.0, 0.0, 0.0, 1.0],
    [2.0, 0.0, 2.0, 0.5, 0.0, 0.5],
    [2.0, 0.0, NAN, 1.0, 0.0, 0.0],
    [2.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    [2.0, 1.0, 1.0, 0.0, 0.0, 1.0],
    [2.0, 1.0, 2.0, 0.5, 0.0, 0.5],
    [2.0, 1.0, NAN, 1.0, 0.0, 0.0],
    [2.0, 2.0, 0.0, 0.0, 0.0, 1.0],
    [2.0, 2.0, 1.0, 0.0, 0.0, 1.0],
    [2.0, 2.0, 2.0, 1.0, 0.0, 0.0],
    [2.0, 2.0, NAN, 1.0, 0.0, 0.0],
    [2.0, NAN, 0.0, 0.0, 0.0, 0.0],
    [2.0, NAN, 1.0, 0.0, 0.0, 0.0],
    [2.0, NAN, 2.0, 1.0, 0.0, 0.0],
    [2.0, NAN, NAN, 1.0, 0.0, 0.0],
    [NAN, 0.0, 0.0, 1.0, 0.0, 0.0],
    [NAN, 0.0, 1.0, 1.0, 0.0, 0.0],
    [NAN, 0.0, 2.0, 1.0, 0.0, 0.0],
    [NAN, 0.0, NAN, 1.0, 0.0, 0.0],
    [NAN, 1.0, 0.0, 1.0, 0.0, 1.0],
    [NAN, 1.0, 1.0, 1.0, 0.0, 0.0],
    [NAN, 1.0, 2.0, 1.0, 0.0, 0.0],
    [NAN, 1.0, NAN, 1.0, 0.0, 0.0],
    [NAN, 2.0, 0.0, 1.0, 0.0, 1.0],
    [NAN, 2.0, 1.0, 1.0, 0.0, 1.0],
    [NAN, 2.0, 2.0, 1.0, 0.0, 0.0],
    [NAN, 2.0, NAN, 1.0, 0.0, 0.0],
    [NAN, NAN, 0.0, 1.0, 0.0, 0.0],
    [NAN, NAN, 1.0, 1.0, 0.0, 0.0],
    [NAN, NAN, 2.0, 1.0, 0.0, 0.0],
    [NAN, NAN, NAN, 1.0, 0.0, 0.0],
];
const CLAMP_ONE: [[f64; 5]; 32] = [
    [0.0, 0.0, 0.0, 0.5, 0.5],
    [0.0, 0.0, 1.0, 0.5, 0.5],
    [0.0, 1.0, 0.0, 0.0, 1.0],
    [0.0, 1.0, 1.0, 1.0, 0.0],
    [0.0, 2.0, 0.0, 0.0, 1.0],
    [0.0, 2.0, 1.0, 1.0, 0.0],
    [0.0, NAN, 0.0, 1.0, 1.0],
    [0.0, NAN, 1.0, 1.0, 1.0],
    [1.0, 0.0, 0.0, 1.0, 0.0],
    [1.0, 0.0, 1.0, 0.0, 1.0],
    [1.0, 1.0, 0.0, 0.5, 0.5],
    [1.0, 1.0, 1.0, 0.5, 0.5],
    [1.0, 2.0, 0.0, 0.0, 1.0],
    [1.0, 2.0, 1.0, 1.0, 0.0],
    [1.0, NAN, 0.0, 1.0, 1.0],
    [1.0, NAN, 1.0, 1.0, 1.0],
    [2.0, 0.0, 0.0, 1.0, 0.0],
    [2.0, 0.0, 1.0, 0.0, 1.0],
    [2.0, 1.0, 0.0, 1.0, 0.0],
    [2.0, 1.0, 1.0, 0.0, 1.0],
    [2.0, 2.0, 0.0, 0.5, 0.5],
    [2.0, 2.0, 1.0, 0.5, 0.5],
    [2.0, NAN, 0.0, 1.0, 1.0],
    [2.0, NAN, 1.0, 1.0, 1.0],
    [NAN, 0.0, 0.0, 1.0, 1.0],
    [NAN, 0.0, 1.0, 1.0, 1.0],
    [NAN, 1.0, 0.0, 1.0, 1.0],
    [NAN, 1.0, 1.0, 1.0, 1.0],
    [NAN, 2.0, 0.0, 1.0, 1.0],
    [NAN, 2.0, 1.0, 1.0, 1.0],
    [NAN, NAN, 0.0, 1.0, 1.0],
    [NAN, NAN, 1.0, 1.0, 1.0],
];

fn one(v: f64) -> Var {
    Var::parameter(Tensor::from_slice(&[v], &[1], Device::Cpu).unwrap()).unwrap()
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

#[test]
fn clamp_tensor_gradients_match_pytorch() {
    for row in CLAMP_BOTH {
        let (x, lo, hi) = (one(row[0]), one(row[1]), one(row[2]));
        x.clamp_tensor(Some(&lo), Some(&hi))
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let got = [&x, &lo, &hi].map(|v| v.grad().unwrap().to_vec::<f64>().unwrap()[0]);
        assert!(
            (0..3).all(|i| same(got[i], row[3 + i])),
            "clamp({}, {}, {}): got {got:?}, PyTorch {:?}",
            row[0],
            row[1],
            row[2],
            &row[3..]
        );
    }
    for row in CLAMP_ONE {
        let (x, b) = (one(row[0]), one(row[1]));
        let y = if row[2] == 0.0 {
            x.clamp_tensor(Some(&b), None)
        } else {
            x.clamp_tensor(None, Some(&b))
        };
        y.unwrap().sum(None, false).unwrap().backward().unwrap();
        let got = [&x, &b].map(|v| v.grad().unwrap().to_vec::<f64>().unwrap()[0]);
        assert!(
            same(got[0], row[3]) && same(got[1], row[4]),
            "clamp {row:?}: got {got:?}"
        );
    }
}

#[test]
fn clamp_tensor_gradients_sum_over_broadcast_bounds() {
    // torch.clamp(x (2, 3), min (3,), max (2, 1)): PyTorch 2.15's gradients
    // of sum(clamp * arange(1, 7)), checked in the venv.
    let x = Var::parameter(
        Tensor::from_slice(&[-1.0f64, 0.5, 2.0, 3.0, -2.0, 0.2], &[2, 3], Device::Cpu).unwrap(),
    )
    .unwrap();
    let lo = Var::parameter(Tensor::from_slice(&[0.0f64, 0.0, 0.5], &[3], Device::Cpu).unwrap())
        .unwrap();
    let hi =
        Var::parameter(Tensor::from_slice(&[1.0f64, 2.5], &[2, 1], Device::Cpu).unwrap()).unwrap();
    let w = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], Device::Cpu).unwrap();
    x.clamp_tensor(Some(&lo), Some(&hi))
        .unwrap()
        .mul(&Var::new(w))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 2.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(lo.grad().unwrap().to_vec::<f64>().unwrap(), [1.0, 5.0, 6.0]);
    assert_eq!(hi.grad().unwrap().to_vec::<f64>().unwrap(), [3.0, 4.0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn flip_roll_repeat_gradcheck(m in 1usize..4, n in 1usize..4, p in 1usize..4,
                                  transposed in any::<bool>(), shift in -7i64..7, r in 0i64..3,
                                  seed in any::<u64>()) {
        let a = randn(&[m, n, p], seed);
        let view = move |v: &Var| if transposed { v.transpose(0, 2) } else { Ok(v.clone()) };
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.flip(&[0, -1]));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.roll(&[shift, 1], &[1, 0]));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.roll(&[shift], &[]));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.repeat(&[2, r, 1, 2]));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.tile(&[2, r + 1]));
        gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.repeat_interleave(r as usize, Some(1)));
        gradcheck(vec![a], seed, move |v| {
            let counts = Tensor::from_slice(&[2i64, 0, 1][..n.min(3)], &[n.min(3)], Device::Cpu)?;
            view(&v[0])?.narrow(1, 0, n.min(3) as i64)?.repeat_interleave(&counts, Some(1))
        });
    }

    #[test]
    fn pad_gradcheck(n in 1usize..3, h in 2usize..5, w in 2usize..5, transposed in any::<bool>(),
                     l in -1i64..2, r in -1i64..2, t in -1i64..2, b in -1i64..2, value in -2.0f64..2.0,
                     seed in any::<u64>()) {
        let a = randn(&[n, h, w], seed);
        let view = move |v: &Var| if transposed { v.transpose(1, 2) } else { Ok(v.clone()) };
        let pads = [l, r, t, b];
        for mode in [PadMode::Constant(value.into()), PadMode::Reflect, PadMode::Replicate, PadMode::Circular] {
            // Only pads the mode takes at these sizes.
            if a.transpose(1, 2).unwrap().pad(&pads, mode).is_err() || a.pad(&pads, mode).is_err() {
                continue;
            }
            gradcheck(vec![a.clone()], seed, move |v| view(&v[0])?.pad(&pads, mode));
        }
        gradcheck(vec![a], seed, move |v| view(&v[0])?.pad(&[2, 1], PadMode::Constant(0.0.into())));
    }

    #[test]
    fn clamp_tensor_gradcheck(m in 1usize..4, n in 1usize..4, which in 0usize..3, seed in any::<u64>()) {
        // Random normal operands: no ties (where the gradient jumps).
        let x = randn(&[m, n], seed);
        let lo = randn(&[n], seed.wrapping_add(1)).sub(0.5).unwrap();
        let hi = randn(&[m, 1], seed.wrapping_add(2)).add(0.5).unwrap();
        match which {
            0 => gradcheck(vec![x, lo, hi], seed, |v| v[0].clamp_tensor(Some(&v[1]), Some(&v[2]))),
            1 => gradcheck(vec![x, lo], seed, |v| v[0].clamp_tensor(Some(&v[1]), None)),
            _ => gradcheck(vec![x, hi], seed, |v| v[0].clamp_tensor(None, Some(&v[1]))),
        }
    }
}

/// A negative repeat count on an empty dim (allowed, as in PyTorch) gives
/// an empty result whose backward is the input's (empty) zero gradient.
#[test]
fn repeat_with_a_negative_count_on_an_empty_dim_back_propagates() {
    let x = Var::parameter(Tensor::zeros(&[3, 0, 3], DType::F32, Device::Cpu).unwrap()).unwrap();
    let y = x.tile(&[-1, 2]).unwrap();
    assert_eq!(y.shape(), [3, 0, 6]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().shape(), [3, 0, 3]);
}
