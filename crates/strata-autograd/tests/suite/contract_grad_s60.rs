//! Gradients of session 60's ops (einsum, tensordot, inner, outer, kron,
//! diagonal, diag, diag_embed, trace, baddbmm, addbmm, addmv, addr, lerp,
//! cross): against PyTorch 2.15's (`tests/data/contract_grad_s60.json`,
//! written by `benches/anchors/gen_contract_grad_s60.py`: f64 operands, the
//! gradients of `sum(op(...) * w)`), and against central finite differences
//! in f64 on random inputs and layouts (`common::gradcheck`).

use crate::common::{gradcheck, randn};
use crate::pytorch_fixture::{fixture, num};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, Scalar, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(include_str!("../data/contract_grad_s60.json")));

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(num).collect()
}

fn dims(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        v => Scalar::Float(num(v)),
    }
}

/// The op of a case on variables.
fn apply(op: &str, v: &[Var], args: &Value) -> Result<Var> {
    let i = |k: &str| args[k].as_i64().unwrap();
    match op {
        "einsum" => {
            let refs: Vec<&Var> = v.iter().collect();
            Var::einsum(args["eq"].as_str().unwrap(), &refs)
        }
        "tensordot" => match &args["dims"] {
            Value::Number(n) => v[0].tensordot(&v[1], n.as_i64().unwrap()),
            d => {
                let (a, b) = (ints(&d[0]), ints(&d[1]));
                v[0].tensordot(&v[1], (&a[..], &b[..]))
            }
        },
        "inner" => v[0].inner_product(&v[1]),
        "outer" => v[0].outer(&v[1]),
        "kron" => v[0].kron(&v[1]),
        "diagonal" => v[0].diagonal(i("offset"), i("dim1"), i("dim2")),
        "diag" => v[0].diag(i("offset")),
        "diag_embed" => v[0].diag_embed(i("offset"), i("dim1"), i("dim2")),
        "trace" => v[0].trace(),
        "baddbmm" | "addbmm" | "addmv" | "addr" => {
            let (b, a) = (scalar(&args["beta"]), scalar(&args["alpha"]));
            match op {
                "baddbmm" => v[0].baddbmm(&v[1], &v[2], b, a),
                "addbmm" => v[0].addbmm(&v[1], &v[2], b, a),
                "addmv" => v[0].addmv(&v[1], &v[2], b, a),
                _ => v[0].addr(&v[1], &v[2], b, a),
            }
        }
        "lerp" => match v.get(2) {
            Some(w) => v[0].lerp(&v[1], w),
            None => v[0].lerp(&v[1], scalar(&args["weight"])),
        },
        "cross" => v[0].cross(&v[1], i("dim")),
        _ => panic!("op {op}"),
    }
}

#[test]
fn gradients_as_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    let mut bad = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let vars: Vec<Var> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let t = Tensor::from_vec(floats(&x["values"]), &dims(&x["shape"]), Device::Cpu)
                    .unwrap();
                Var::parameter(t).unwrap()
            })
            .collect();
        let out = apply(c["op"].as_str().unwrap(), &vars, &c["args"]).unwrap();
        assert_eq!(out.shape(), &dims(&c["out_shape"])[..], "{name}");
        let w = Tensor::from_vec(floats(&c["w"]), out.shape(), Device::Cpu).unwrap();
        out.mul(&Var::new(w))
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        for (k, (v, g)) in vars.iter().zip(c["grads"].as_array().unwrap()).enumerate() {
            let want = floats(g);
            let have = v.grad().expect("a gradient").to_vec::<f64>().unwrap();
            let scale = want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            if have.len() != want.len()
                || have
                    .iter()
                    .zip(&want)
                    .any(|(h, w)| (h - w).abs() > 1e-12 * scale)
            {
                bad.push(format!("{name} input {k}: {have:?} vs PyTorch {want:?}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn diagonal_is_a_view_whose_inplace_writes_reach_the_base() {
    let a = Var::parameter(Tensor::ones(&[3, 3], DType::F64, Device::Cpu).unwrap()).unwrap();
    let b = a.mul(2.0).unwrap();
    let d = b.diagonal(0, 0, 1).unwrap();
    assert!(d.data().same_storage(b.data()));
    d.mul_(3.0).unwrap();
    // b's diagonal is now 6: the gradient of sum(b) w.r.t. a is 6 there, 2 elsewhere.
    b.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(
        a.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![6.0, 2.0, 2.0, 2.0, 6.0, 2.0, 2.0, 2.0, 6.0]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn finite_differences(seed in any::<u64>(), transpose in any::<bool>(), w in -2.0f64..2.0) {
        let t = move |v: &Var| if transpose { v.transpose(-1, -2) } else { Ok(v.clone()) };
        gradcheck(vec![randn(&[3, 4], seed), randn(&[3, 2], seed + 1)], seed, move |v| {
            Var::einsum("ji,jk->ik", &[&v[0], &v[1]])
        });
        gradcheck(vec![randn(&[3, 3, 2], seed), randn(&[2, 4], seed + 1)], seed, move |v| {
            let x = if transpose { v[0].permute(&[1, 0, 2])? } else { v[0].clone() };
            Var::einsum("iij,jk->ik", &[&x, &v[1]])
        });
        gradcheck(vec![randn(&[2, 3, 4], seed), randn(&[3, 4], seed + 1)], seed, move |v| {
            // A transposed [4, 3] operand.
            v[0].tensordot(&v[1].transpose(-1, -2)?, (&[1i64, 2][..], &[1i64, 0][..]))
        });
        gradcheck(vec![randn(&[3], seed), randn(&[4], seed + 1)], seed, |v| v[0].outer(&v[1]));
        // kron of a transposed operand is PyTorch's view error
        // (`layouts_and_quirks_as_pytorch` in strata-tensor's suite): made
        // contiguous, its gradient still flows back through the transpose.
        gradcheck(vec![randn(&[2, 3], seed), randn(&[2, 2], seed + 1)], seed, move |v| {
            t(&v[0])?.contiguous()?.kron(&v[1])
        });
        gradcheck(vec![randn(&[2, 3], seed), randn(&[2, 2], seed + 1)], seed, |v| {
            assert!(v[0].t()?.kron(&v[1]).is_err());
            v[0].kron(&v[1])
        });
        gradcheck(vec![randn(&[3, 4], seed)], seed, move |v| t(&v[0])?.diagonal(1, 0, 1));
        gradcheck(vec![randn(&[3, 4], seed)], seed, move |v| t(&v[0])?.trace());
        gradcheck(vec![randn(&[4], seed)], seed, |v| v[0].diag(-1));
        gradcheck(vec![randn(&[2, 3], seed)], seed, move |v| t(&v[0])?.diag_embed(1, 0, 2));
        gradcheck(vec![randn(&[3, 1], seed), randn(&[2, 3, 4], seed + 1), randn(&[2, 2, 4], seed + 2)], seed,
                  move |v| v[0].baddbmm(&v[1], &v[2].transpose(-1, -2)?, w, 1.5));
        gradcheck(vec![randn(&[2], seed), randn(&[3, 2, 4], seed + 1), randn(&[3, 4, 2], seed + 2)], seed,
                  move |v| v[0].addbmm(&v[1], &v[2], 1, w));
        gradcheck(vec![randn(&[3], seed), randn(&[4, 3], seed + 1), randn(&[4], seed + 2)], seed,
                  move |v| v[0].addmv(&v[1].t()?, &v[2], w, 0.5));
        gradcheck(vec![randn(&[1, 2], seed), randn(&[3], seed + 1), randn(&[2], seed + 2)], seed,
                  move |v| v[0].addr(&v[1], &v[2], 2, w));
        gradcheck(vec![randn(&[2, 3], seed), randn(&[3], seed + 1)], seed, move |v| v[0].lerp(&v[1], w));
        gradcheck(vec![randn(&[2, 3], seed), randn(&[3], seed + 1), randn(&[2, 1], seed + 2)], seed,
                  move |v| v[0].lerp(&v[1], &v[2]));
        gradcheck(vec![randn(&[4, 3], seed), randn(&[1, 3], seed + 1)], seed, move |v| v[0].cross(&v[1], -1));
    }
}

#[test]
fn errors_are_typed_and_record_nothing() {
    let a = Var::parameter(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap()).unwrap();
    assert!(Var::einsum("ij,jk", &[&a, &a]).is_err());
    assert!(a.diagonal(0, 1, 1).is_err());
    assert!(a.trace().is_ok());
    assert!(a.cross(&a, -1).is_ok());
    assert!(a.cross(&a, 0).is_err());
    assert!(a.lerp(&a.to_dtype(DType::F64).unwrap(), 0.5).is_err());
    assert!(a.baddbmm(&a, &a, 1, 1).is_err());
    assert!(a.grad().is_none());
}
