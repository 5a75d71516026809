//! Session 54c: a hostile-input sweep of the CPU paths session 54 added,
//! against PyTorch 2.15 (`tests/data/hostile_sweep_s54c.json.gz`, written
//! by `benches/anchors/gen_hostile_sweep_s54c.py`):
//!
//! - f32 `cross_entropy` (PyTorch's f32 order): empty batches, one class, no
//!   class, 1-D inputs, (N, C, d1, d2, d3) with dims of size 0 and 1,
//!   transposed / stepped / expanded logits, targets and weights, weights
//!   holding 0, NaN, ±inf and negative values, all targets ignored,
//!   ignore_index a valid class / negative / huge / i64::MIN, label
//!   smoothing 0, 1, tiny, negative, NaN, ±inf, 1.5, probability targets
//!   holding NaN / inf, every reduction;
//! - sums and means over an outer dim (PyTorch's grouped cascade): every
//!   dtype, dims of size 0, ncols 1..70 around the groups, keepdim, a
//!   1<<20 x 3 input, stepped and transposed inputs;
//! - f32 `log_softmax` along dim 0 / -2: dims of size 0 and 1, NaN / ±inf;
//! - f16 / bf16 exact `gelu`: empty, 0-d, lengths 1, 31, 32, 33, 64, 65,
//!   stepped, transposed and expanded inputs, over the values where
//!   PyTorch's scalar and vector loops differ.
//!
//! Each case's result is compared bit for bit (dtype, shape, values, the
//! sign of zeros; NaN against NaN), and where PyTorch refuses, strata must
//! return an error, without panicking and with its inputs unchanged.
//!
//! Found and fixed: f32 cross_entropy with no class (`(N, 0)` logits, every
//! target ignored) made slices from the empty operands' null pointers
//! (undefined behaviour; a debug build aborted); an f32 sum over an outer
//! dim whose kept dim is not contiguous (a view stepping by 2) added each
//! column in row order, not PyTorch's (`scalar_outer_sum`: groups of four
//! columns by `multi_row_sum`), differing in the last place; the f16 / bf16
//! GELU elements PyTorch computes in its scalar loop (`std::erf`, not its
//! vectorised erf; fixed by helper-98, see `gelu_half_hostile_as_pytorch`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::pytorch_fixture::{dtype, fixture, gunzip, hexes, ints};
use serde_json::Value;
use strata_tensor::{CrossEntropyArgs, DType, Device, GeluApprox, Reduction, Tensor};

fn load() -> Value {
    fixture(&gunzip(include_bytes!(
        "../data/hostile_sweep_s54c.json.gz"
    )))
}

fn hex1(v: &Value) -> f64 {
    hexes(v.as_str().unwrap())[0]
}

/// The generator's SplitMix64 draws.
fn rand_base(d: &Value) -> Vec<f64> {
    let mut s = d["seed"].as_u64().unwrap();
    let n = d["n"].as_u64().unwrap() as usize;
    let scale = d["scale"].as_f64().unwrap();
    let modulus = d["mod"].as_f64();
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let v = ((z >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) * scale;
            match modulus {
                Some(m) => (v.abs() * 30.0).trunc() % m,
                None => v,
            }
        })
        .collect()
}

/// A spec's tensor: its base in its dtype, viewed by as_strided.
fn build(spec: &Value) -> Tensor {
    if let Some(dt) = spec.get("hash") {
        let dt = dtype(dt.as_str().unwrap());
        let n = (1usize << 20) * 3;
        let v: Vec<f64> = (0..n as u64)
            .map(|k| match dt {
                DType::I64 => (k.wrapping_mul(2_654_435_761) % 1000) as f64,
                DType::F16 | DType::BF16 => {
                    (k.wrapping_mul(2_654_435_761) % 256) as f64 / 16.0 - 8.0
                }
                _ => (k.wrapping_mul(2_654_435_761) % (1 << 20)) as f64 / 1024.0 - 512.0,
            })
            .collect();
        return Tensor::from_slice(&v, &[1 << 20, 3], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
    }
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let base = match &spec["base"] {
        Value::String(s) => hexes(s),
        d => rand_base(d),
    };
    Tensor::from_slice(&base, &[base.len()], Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
        .as_strided(
            &ints(&spec["size"]),
            &ints(&spec["stride"]),
            Some(spec["offset"].as_i64().unwrap()),
        )
        .unwrap()
}

fn host(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Checks `run`'s answer against the case's `out`; `inputs` must be
/// unchanged afterwards.
fn check(
    name: &str,
    want: &Value,
    inputs: &[&Tensor],
    run: impl FnOnce() -> strata_tensor::Result<Tensor>,
    failures: &mut Vec<String>,
) {
    let before: Vec<Vec<f64>> = inputs.iter().map(|t| host(t)).collect();
    let got = match catch_unwind(AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{name}: PANIC {msg}"));
            return;
        }
    };
    for (t, b) in inputs.iter().zip(&before) {
        if !same_bits(&host(t), b) {
            failures.push(format!("{name}: an input changed"));
        }
    }
    match (got, want.get("error")) {
        (Err(_), Some(_)) => {}
        (Err(e), None) => failures.push(format!("{name}: error {e}, PyTorch answers")),
        (Ok(t), Some(e)) => failures.push(format!(
            "{name}: answered {:?} {:?}, PyTorch refuses: {e}",
            t.shape(),
            host(&t)
        )),
        (Ok(t), None) => {
            let dt = dtype(want["dtype"].as_str().unwrap());
            let size: Vec<usize> = ints(&want["size"]).iter().map(|&s| s as usize).collect();
            let values = hexes(want["values"].as_str().unwrap());
            let got = host(&t);
            if t.dtype() != dt || t.shape() != size.as_slice() || !same_bits(&got, &values) {
                let shown = |v: &[f64]| v.iter().take(12).copied().collect::<Vec<_>>();
                let first = got
                    .iter()
                    .zip(&values)
                    .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()));
                failures.push(format!(
                    "{name}: {:?} {:?} {:?}, PyTorch's {dt:?} {size:?} {:?} (first difference at {first:?})",
                    t.dtype(),
                    t.shape(),
                    shown(&got),
                    shown(&values)
                ));
            }
        }
    }
}

fn report(what: &str, n: usize, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} of {n} {what} cases differ from PyTorch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn cross_entropy_f32_hostile_as_pytorch() {
    let f = load();
    let cases = f["ce"].as_array().unwrap();
    assert!(cases.len() > 700);
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let x = build(&c["x"]);
        let t = build(&c["target"]);
        let w = (!c["weight"].is_null()).then(|| build(&c["weight"]));
        let args = CrossEntropyArgs {
            weight: w.as_ref(),
            ignore_index: c["ignore_index"].as_i64().unwrap(),
            reduction: match c["reduction"].as_str().unwrap() {
                "none" => Reduction::None,
                "mean" => Reduction::Mean,
                _ => Reduction::Sum,
            },
            label_smoothing: hex1(&c["label_smoothing"]),
        };
        let mut inputs = vec![&x, &t];
        inputs.extend(w.iter());
        check(
            name,
            &c["out"],
            &inputs,
            || x.cross_entropy(&t, args),
            &mut failures,
        );
    }
    report("cross_entropy", cases.len(), failures);
}

#[test]
fn outer_dim_sums_hostile_as_pytorch() {
    let f = load();
    let cases = f["sum"].as_array().unwrap();
    assert!(cases.len() > 600);
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let x = build(&c["x"]);
        let dims = ints(&c["dims"]);
        let keep = c["keepdim"].as_bool().unwrap();
        let mean = c["op"] == "mean";
        let inputs: Vec<&Tensor> = if c["x"].get("hash").is_some() {
            vec![]
        } else {
            vec![&x]
        };
        check(
            name,
            &c["out"],
            &inputs,
            || {
                if mean {
                    x.mean(Some(&dims), keep)
                } else {
                    x.sum(Some(&dims), keep)
                }
            },
            &mut failures,
        );
    }
    report("sum/mean", cases.len(), failures);
}

#[test]
fn log_softmax_outer_dim_hostile_as_pytorch() {
    let f = load();
    let cases = f["lsm"].as_array().unwrap();
    let mut failures = Vec::new();
    for c in cases {
        let x = build(&c["x"]);
        let dim = c["dim"].as_i64().unwrap();
        check(
            c["name"].as_str().unwrap(),
            &c["out"],
            &[&x],
            || x.log_softmax(dim, None),
            &mut failures,
        );
    }
    report("log_softmax", cases.len(), failures);
}

/// f16 / bf16 exact GELU as PyTorch's: its vector loop
/// (`Math::gelu_vec_`) and, on the elements its scalar loop takes (past the
/// last whole 32 of a contiguous run, every element of a gapped input or a
/// 0-d one), `std::erf` in f32 (`Tensor::gelu`, `layout::
/// pytorch_scalar_loop_mask`). Before helper-98 strata took the vector loop
/// everywhere and the cases built on the values where the two loops differ
/// were pinned to PyTorch's vector-loop values; now each case must equal
/// PyTorch's own answer.
#[test]
fn gelu_half_hostile_as_pytorch() {
    let f = load();
    let cases = f["gelu"].as_array().unwrap();
    let mut failures = Vec::new();
    let mut n = 0;
    let mut scalar_loop_differs = 0;
    for c in cases.iter().filter(|c| c.get("x").is_some()) {
        n += 1;
        let name = c["name"].as_str().unwrap();
        let x = build(&c["x"]);
        if c["vec"] != c["out"] {
            scalar_loop_differs += 1;
        }
        check(
            name,
            &c["out"],
            &[&x],
            || x.gelu(GeluApprox::None),
            &mut failures,
        );
    }
    report("gelu", n, failures);
    // The cases built on the values where the two loops differ.
    assert!(scalar_loop_differs > 0 && scalar_loop_differs < n);
}
