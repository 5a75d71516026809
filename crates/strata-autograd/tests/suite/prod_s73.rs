//! Session 73: `Tensor::prod` and `Var::prod` against PyTorch 2.15's
//! `torch.prod` and its gradient (`benches/anchors/gen_prod_s73.py`: f32
//! slices with no zero, one zero or several, ±inf and NaN; i64 and bool;
//! dims valid or just out of range, keepdim). strata must fail where PyTorch
//! fails and otherwise give its shapes, values (f32 within rounding: the
//! products are formed in another order) and gradients.

use crate::pytorch_fixture::{fixture, gunzip, ints, num};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/prod_s73.json.gz"))));

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(num).collect()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec()
        .unwrap()
}

fn close(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(&g, &w)| {
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-5 * w.abs().max(1e-30)
        })
}

/// Where strata's answer to case `c` differs from PyTorch's, or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let shape: Vec<usize> = ints(&c["shape"]).iter().map(|&s| s as usize).collect();
    let vals = nums(&c["values"]);
    let x = match c["dtype"].as_str().unwrap() {
        "f32" => Tensor::from_slice(
            &vals.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            &shape,
            device,
        ),
        "i64" => Tensor::from_slice(
            &vals.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            &shape,
            device,
        ),
        _ => Tensor::from_slice(
            &vals.iter().map(|&v| v != 0.0).collect::<Vec<_>>(),
            &shape,
            device,
        ),
    }
    .unwrap();
    let (dim, keepdim) = (c["dim"].as_i64(), c["keepdim"].as_bool().unwrap());
    let got = x.prod(dim, keepdim);
    let Some(want) = c.get("result") else {
        return got
            .ok()
            .map(|t| format!("gave shape {:?}, PyTorch failed", t.shape()));
    };
    let t = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(t) => t,
    };
    let ws: Vec<usize> = ints(&want["shape"]).iter().map(|&s| s as usize).collect();
    let want_dtype = if c["dtype"] == "f32" {
        DType::F32
    } else {
        DType::I64
    };
    if t.shape() != ws.as_slice()
        || t.dtype() != want_dtype
        || !close(&f64s(&t), &nums(&want["data"]))
    {
        return Some(format!(
            "gave {:?} {:?} {:?}",
            t.dtype(),
            t.shape(),
            f64s(&t)
        ));
    }
    let wg = c.get("grad")?;
    let v = Var::parameter(x).unwrap();
    let y = v.prod(dim, keepdim).unwrap();
    let n: usize = ws.iter().product();
    let u: Vec<f32> = (0..n).map(|j| ((3 * j) % 7) as f32 / 2.0 - 1.5).collect();
    let u = Var::new(Tensor::from_slice(&u, &ws, device).unwrap());
    y.mul(&u)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let g = v
        .grad()
        .map(|g| f64s(&g))
        .unwrap_or_else(|| vec![0.0; vals.len()]);
    (!close(&g, &nums(wg))).then(|| format!("gradient {g:?}, PyTorch {:?}", nums(wg)))
}

#[test]
fn prod_and_its_gradient_match_pytorch() {
    prod_matches_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn prod_and_its_gradient_match_pytorch_on_a_gpu() {
    prod_matches_on(crate::hostile_calls::gpu());
}

fn prod_matches_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 2_500, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            difference(c, device).map(|w| {
                format!(
                    "{} {} {:?} dim {} keepdim {}: {w}",
                    c["dtype"],
                    c["shape"],
                    nums(&c["values"]),
                    c["dim"],
                    c["keepdim"]
                )
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}
