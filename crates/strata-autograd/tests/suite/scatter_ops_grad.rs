//! Gradients of session 60's scans and index/scatter ops against PyTorch
//! 2.15's (`tests/data/scatter_ops_grad_s60.json`, written by
//! `benches/anchors/gen_scatter_ops_grad_s60.py`: CPU, f64, one thread) and
//! against central finite differences in f64 (`common::gradcheck`).

use crate::common;
use common::*;
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Scalar, ScatterReduce, Tensor};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../data/scatter_ops_grad_s60.json")).unwrap()
});

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            s => panic!("{s}"),
        },
        v => v.as_f64().unwrap(),
    }
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(num).collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn f64s(v: &Value, s: &Value) -> Tensor {
    Tensor::from_vec(nums(v), &shape(s), Device::Cpu).unwrap()
}

fn index(c: &Value) -> Tensor {
    let v: Vec<i64> = c["index"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    Tensor::from_vec(v, &shape(&c["ishape"]), Device::Cpu).unwrap()
}

fn indices(c: &Value) -> Vec<Option<Tensor>> {
    c["indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i.as_array().map(|a| {
                let v: Vec<i64> = a.iter().map(|x| x.as_i64().unwrap()).collect();
                Tensor::from_vec(v.clone(), &[v.len()], Device::Cpu).unwrap()
            })
        })
        .collect()
}

fn reduce_of(s: &str) -> ScatterReduce {
    match s {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" => ScatterReduce::Amax,
        _ => ScatterReduce::Amin,
    }
}

/// The case's op on `x` (and `src`).
fn apply(c: &Value, x: &Var, src: Option<&Var>) -> Var {
    let a = &c["args"];
    let dim = a["dim"].as_i64().unwrap_or(0);
    match c["op"].as_str().unwrap() {
        "cumprod" => x.cumprod(dim, None).unwrap(),
        "cummax" => x.cummax(dim).unwrap().0,
        "cummin" => x.cummin(dim).unwrap().0,
        "logcumsumexp" => x.logcumsumexp(dim).unwrap(),
        "index_add" => x
            .index_add(dim, &index(c), src.unwrap(), a["alpha"].as_f64().unwrap())
            .unwrap(),
        "index_copy" => x.index_copy(dim, &index(c), src.unwrap()).unwrap(),
        "index_fill" => x
            .index_fill(dim, &index(c), a["value"].as_f64().unwrap())
            .unwrap(),
        "scatter" => x.scatter(dim, &index(c), src.unwrap()).unwrap(),
        "scatter_value" => x
            .scatter_value(dim, &index(c), a["value"].as_f64().unwrap())
            .unwrap(),
        "scatter_reduce" => x
            .scatter_reduce(
                dim,
                &index(c),
                src.unwrap(),
                reduce_of(a["reduce"].as_str().unwrap()),
                a["include_self"].as_bool().unwrap(),
            )
            .unwrap(),
        "index_put" => {
            let idx = indices(c);
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|t| t.as_ref()).collect();
            x.index_put(&refs, src.unwrap(), a["accumulate"].as_bool().unwrap())
                .unwrap()
        }
        "index_tensors" => {
            let idx = indices(c);
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|t| t.as_ref()).collect();
            x.index_tensors(&refs).unwrap()
        }
        op => panic!("{op}"),
    }
}

/// Equal, NaN equal to NaN, within 1e-12 relative (the sums may associate
/// differently from PyTorch's).
fn close(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * (1.0 + b.abs())
        })
}

#[test]
fn gradients_are_pytorchs() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 34);
    for c in cases {
        let x = Var::parameter(f64s(&c["x"], &c["xshape"])).unwrap();
        let src = c
            .get("src")
            .map(|s| Var::parameter(f64s(s, &c["sshape"])).unwrap());
        let out = apply(c, &x, src.as_ref());
        let out_v = out.data().to_vec::<f64>().unwrap();
        assert!(
            close(&out_v, &nums(&c["out"])),
            "{}: forward {out_v:?} vs {}",
            c["op"],
            c["out"]
        );
        let w = Var::new(Tensor::from_vec(nums(&c["w"]), out.shape(), Device::Cpu).unwrap());
        out.mul(&w)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let gx = x.grad().unwrap().to_vec::<f64>().unwrap();
        assert!(
            close(&gx, &nums(&c["gx"])),
            "{} {}: grad x {gx:?} vs {}",
            c["op"],
            c["args"],
            c["gx"]
        );
        if let Some(s) = &src {
            let gs = s.grad().unwrap().to_vec::<f64>().unwrap();
            assert!(
                close(&gs, &nums(&c["gsrc"])),
                "{} {}: grad src {gs:?} vs {}",
                c["op"],
                c["args"],
                c["gsrc"]
            );
        }
    }
}

fn idx(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu).unwrap()
}

#[test]
fn finite_differences() {
    // cumprod, with a zero and without, along both dims.
    let mut x = randn(&[3, 4], 1);
    gradcheck(vec![x.clone()], 2, |v| v[0].cumprod(1, None));
    x = x.index_fill(1, &idx(&[1], &[1]), 0.0).unwrap();
    gradcheck(vec![x.clone()], 3, |v| v[0].cumprod(1, None));
    gradcheck(vec![x], 4, |v| v[0].cumprod(0, None));
    gradcheck(vec![randn(&[2, 5], 5)], 6, |v| v[0].logcumsumexp(-1));
    gradcheck(vec![randn(&[4, 3], 7)], 8, |v| v[0].logcumsumexp(0));
    gradcheck(vec![randn(&[5], 9)], 10, |v| v[0].cummax(0).map(|r| r.0));
    let i = idx(&[2, 0, 2], &[3]);
    gradcheck(vec![randn(&[3, 2], 11), randn(&[3, 2], 12)], 13, |v| {
        v[0].index_add(0, &i, &v[1], 1.5)
    });
    let i2 = idx(&[1, 0], &[2]);
    gradcheck(vec![randn(&[2, 3], 14), randn(&[2, 2], 15)], 16, |v| {
        v[0].index_copy(1, &i2, &v[1])
    });
    let si = idx(&[0, 0, 1, 2, 2, 2], &[2, 3]);
    for (k, red) in [ScatterReduce::Sum, ScatterReduce::Mean, ScatterReduce::Prod]
        .into_iter()
        .enumerate()
    {
        for inc in [true, false] {
            gradcheck(
                vec![randn(&[2, 3], 17 + k as u64), randn(&[2, 3], 20)],
                21,
                |v| v[0].scatter_reduce(1, &si, &v[1], red, inc),
            );
        }
    }
    let ui = idx(&[2, 0, 1, 1, 2, 0], &[2, 3]);
    gradcheck(vec![randn(&[2, 3], 22), randn(&[2, 3], 23)], 24, |v| {
        v[0].scatter(1, &ui, &v[1])
    });
    let a = idx(&[0, 1, 1], &[3]);
    let b = idx(&[2, 0, 2], &[3]);
    gradcheck(vec![randn(&[2, 2, 3], 25), randn(&[3, 1], 26)], 27, |v| {
        v[0].index_put(&[Some(&a), None, Some(&b)], &v[1], true)
    });
    gradcheck(vec![randn(&[2, 2, 3], 28)], 29, |v| {
        v[0].index_tensors(&[Some(&a), None, Some(&b)])
    });
}

#[test]
fn integer_cumprod_dtype_is_refused_when_recorded() {
    let x = Var::parameter(randn(&[3], 1)).unwrap();
    assert!(x.cumprod(0, Some(DType::I64)).is_err());
    let y = x.cumprod(0, Some(DType::F32)).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().dtype(), DType::F64);
    let _ = Scalar::Int(0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// cummax's gradient is 1 on the elements the running maximum came
    /// from, weighted by how many outputs point at them.
    #[test]
    fn cummax_gradient_counts_uses(v in proptest::collection::vec(-3i32..3, 1..12)) {
        let data: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
        let x = Var::parameter(Tensor::from_slice(&data, &[data.len()], Device::Cpu).unwrap()).unwrap();
        let (y, i) = x.cummax(0).unwrap();
        y.sum(None, false).unwrap().backward().unwrap();
        let mut want = vec![0.0; data.len()];
        for k in i.to_vec::<i64>().unwrap() {
            want[k as usize] += 1.0;
        }
        prop_assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), want);
    }
}
