//! Session 79: a hostile-input sweep of the element-wise math session 79
//! added (special functions, `logit`, `xlog1py`, `hypot`, `copysign`,
//! `nextafter`, `fmax`/`fmin`, `heaviside`, `gcd`/`lcm`, the shifts,
//! `signbit`, `ldexp`, `frexp`, `float_power`, the divisions, `isclose`,
//! `isreal`, `rad2deg`/`deg2rad`, `angle`, `positive`) against PyTorch
//! 2.15's CPU (`benches/anchors/gen_hostile_s79.py`): every unary op at the
//! edges of its domain in every dtype, on empty, 0-d, transposed, stepped
//! and expanded operands; `polygamma`'s `n` and `mvlgamma`'s `p` at 0, the
//! ends of int64 and below; `gcd`/`lcm` at i64::MIN and wrapping u8; shifts
//! by negative amounts, the bit width and beyond; `ldexp` by huge
//! exponents; `frexp` of zeros, infinities, NaN and subnormals; `nextafter`
//! at each dtype's ends; mixed dtypes, bool operands, scalars of every
//! kind, broadcasts that fail and results too large to allocate; `isclose`
//! with negative and NaN tolerances; division of integers by zero.
//!
//! Where PyTorch fails strata must fail with a typed error (of the kind
//! PyTorch's message names, where it names one), never a panic; where it
//! answers strata must give its dtypes, shapes and values (integers
//! exactly; the special functions within math_ops_s79's tolerance); inputs
//! stay as they were either way. strata has no in-place forms of these ops.

use crate::math_ops_s79::apply;
use crate::pytorch_fixture::{
    build_input, close, cpu_kernel_gap, dtype, fixture, gunzip, nums, shape,
};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/hostile_s79.json.gz"))));

/// math_ops_s79's tolerance: the special functions within 2 ulps of f32/
/// f64 (8 for erfinv) and 1 of f16/bf16 (the C libraries under them
/// differ in the last places), `entr`, `ndtr`, `logit` and `xlog1py` of
/// f16/bf16 and every other op bit for bit.
/// On CUDA (`gpu`), math_ops_s79's: the device library's functions are
/// other algorithms, so every float result within 2 ulps of f16/bf16,
/// 2^12 of f32 and 256 of f64.
fn tolerance(op: &str, d: DType, gpu: bool) -> Option<(f64, f64)> {
    let special = matches!(
        op,
        "erfinv"
            | "lgamma"
            | "digamma"
            | "polygamma"
            | "mvlgamma"
            | "i0"
            | "special_i0e"
            | "special_i1"
            | "special_i1e"
            | "sinc"
            | "special_entr"
            | "special_ndtr"
            | "special_ndtri"
            | "special_log_ndtr"
            | "special_erfcx"
            | "logit"
            | "xlog1py"
            | "special_xlog1py"
    );
    if !d.is_float() || !(special || gpu) {
        return None;
    }
    let e = match d {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        DType::F32 => 2f64.powi(-23),
        _ => 2f64.powi(-52),
    };
    if gpu {
        let ulps = match d {
            DType::F16 | DType::BF16 => 2.0,
            DType::F32 => 4096.0,
            _ => 256.0,
        };
        return Some((ulps * e, ulps * e));
    }
    let ulps = match d {
        DType::F16 | DType::BF16
            if matches!(
                op,
                "special_entr" | "special_ndtr" | "logit" | "xlog1py" | "special_xlog1py"
            ) =>
        {
            return None
        }
        DType::F16 | DType::BF16 => 1.0,
        _ if op == "erfinv" => 8.0,
        _ => 2.0,
    };
    Some((ulps * e, ulps * e))
}

/// The error kind PyTorch's message names, where it names one.
fn expected_kind(msg: &str) -> Option<&'static str> {
    if msg.contains("The size of tensor") {
        Some("broadcast")
    } else if msg.contains("not implemented for")
        || msg.contains("only supports floating-point")
        || msg.contains("did not match")
        || msg.contains("boolean tensor")
        || msg.contains("bool tensor")
        || msg.contains("different dtypes")
        || msg.contains("can't be cast")
    {
        Some("dtype")
    } else if msg.contains("negative n")
        || msg.contains("greater than or equal")
        || msg.contains("must be greater than")
        || msg.contains("must be positive")
    {
        Some("value")
    } else {
        None
    }
}

fn kind(e: &TensorError) -> &'static str {
    match e {
        TensorError::Broadcast { .. } => "broadcast",
        TensorError::DType { .. } => "dtype",
        TensorError::Value { .. } => "value",
        _ => "other",
    }
}

/// An input's values (exactly, as i64 for integer dtypes; nothing for
/// expanded inputs of more than 2^20 elements) and version.
fn snapshot(x: &Tensor) -> (Vec<f64>, Vec<i64>, u64) {
    if x.numel() > 1 << 20 {
        return (Vec::new(), Vec::new(), x.version());
    }
    let c = x.contiguous().unwrap();
    if x.dtype().is_float() {
        (c.to_vec_as::<f64>().unwrap(), Vec::new(), x.version())
    } else {
        (
            Vec::new(),
            c.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
            x.version(),
        )
    }
}

fn same(a: &(Vec<f64>, Vec<i64>, u64), b: &(Vec<f64>, Vec<i64>, u64)) -> bool {
    a.1 == b.1
        && a.2 == b.2
        && a.0.len() == b.0.len()
        && a.0
            .iter()
            .zip(&b.0)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Where strata's answer differs from PyTorch's for case `c` on `device`,
/// or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| build_input(d, device))
        .collect();
    let before: Vec<_> = t.iter().map(snapshot).collect();
    let got = match catch_unwind(AssertUnwindSafe(|| apply(c, &t))) {
        Ok(g) => g,
        Err(_) => return Some("panicked".into()),
    };
    for (k, (x, b)) in t.iter().zip(&before).enumerate() {
        if !same(&snapshot(x), b) {
            return Some(format!("input {k} changed"));
        }
    }
    let Some(want) = c.get("results") else {
        let msg = c["error"].as_str().unwrap();
        return match got {
            Ok(_) if cpu_kernel_gap(c, device) => None,
            Ok(ys) => Some(format!(
                "gave {:?} {:?}, PyTorch failed: {msg}",
                ys[0].dtype(),
                ys[0].shape()
            )),
            Err(e) => match expected_kind(msg) {
                Some(k) if k != kind(&e) => {
                    Some(format!("failed as {} ({e}), PyTorch: {msg}", kind(&e)))
                }
                _ => None,
            },
        };
    };
    let want = want.as_array().unwrap();
    let ys = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(ys) => ys,
    };
    if ys.len() != want.len() {
        return Some(format!("{} outputs, PyTorch {}", ys.len(), want.len()));
    }
    let op = c["op"].as_str().unwrap();
    for (k, (y, w)) in ys.iter().zip(want).enumerate() {
        let wd = dtype(w["dtype"].as_str().unwrap());
        let ws = shape(&w["shape"]);
        let y = y.contiguous().unwrap();
        let ok_meta = y.dtype() == wd && y.shape() == ws.as_slice();
        let (ok, g, wv): (bool, String, String) = if wd.is_float() {
            let g = y.to_vec_as::<f64>().unwrap();
            let wv = nums(&w["data"]);
            let tol = tolerance(op, wd, device != CPU);
            let ok = g.len() == wv.len() && g.iter().zip(&wv).all(|(&a, &b)| close(a, b, tol));
            (ok, format!("{g:?}"), format!("{wv:?}"))
        } else {
            let g = if y.dtype().is_float() {
                Vec::new()
            } else {
                y.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap()
            };
            let wv: Vec<i64> = w["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap_or_else(|| v.as_bool().unwrap() as i64))
                .collect();
            (g == wv, format!("{g:?}"), format!("{wv:?}"))
        };
        if !(ok_meta && ok) {
            let cut = |s: String| s.chars().take(400).collect::<String>();
            return Some(format!(
                "output {k}: gave {:?} {:?} {}, PyTorch {wd:?} {ws:?} {}",
                y.dtype(),
                y.shape(),
                cut(g),
                cut(wv)
            ));
        }
    }
    None
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 1300, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            // Which case runs, for a case that kills the process.
            if std::env::var_os("STRATA_H79_TRACE").is_some() {
                eprintln!("case {i}: {} ({})", c["op"], c["note"]);
            }
            difference(c, device)
                .map(|w| format!("case {i}: {} ({}) {}: {w}", c["op"], c["note"], c["args"]))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(60)].join("\n")
    );
}

/// Every listed hostile call agrees with PyTorch: the same error-or-not
/// (and error kind), dtypes, shapes and values, inputs untouched.
#[test]
fn hostile_calls_of_session_79_math_match_pytorch() {
    all_agree_on(CPU);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn hostile_calls_of_session_79_math_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
