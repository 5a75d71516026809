//! Session 79: the element-wise math PyTorch users expect that strata
//! lacked (special functions, `hypot`, `copysign`, `nextafter`, `fmax`/
//! `fmin`, `heaviside`, `gcd`/`lcm`, the shifts, `logit`, `xlog1py`,
//! `signbit`, `ldexp`, `frexp`, `float_power`, `true_divide`/
//! `floor_divide`, `isclose`, `isreal`, `rad2deg`/`deg2rad`, `angle`,
//! `positive`) against PyTorch 2.15's CPU: `benches/anchors/gen_math_ops_s79.py`
//! drew 6,000 calls (every strata dtype, empty and 0-d shapes, transposed
//! operands, broadcasting, NaN, infinities, signed zeros, denormals, huge
//! values, arguments outside their domain). Each must give PyTorch's dtype
//! and shape and its values within the op's tolerance ([`tolerance`]), or
//! fail where PyTorch raised, with the error kind that PyTorch's message
//! names (a dtype refusal is `TensorError::DType`, a bad argument
//! `TensorError::Value`, shapes that do not broadcast `TensorError::Broadcast`).
//! `STRATA_S79_PROBE=FILE` checks another draw of the generator (its third
//! argument is the seed) first.

use crate::pytorch_fixture::{
    check_fixture_and_probe, close, cpu_kernel_gap, differing_cases, dtype, fixture, gunzip, input,
    num, shape,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Operand, Result, Scalar, Tensor, TensorError};

static TEXT: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/math_ops_s79.json.gz")));

/// strata's answer to case `c` on `device`.
pub fn call(c: &Value, device: Device) -> Result<Vec<Tensor>> {
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| input(r, device))
        .collect();
    apply(c, &t)
}

/// A scalar operand: a JSON number (an integer where it holds one), or
/// `{"kind": "bool" | "int" | "float", "value"}` as the hostile sweep
/// writes it (`hostile_sweep_s79`).
pub fn scalar_arg(s: &Value) -> Scalar {
    match s.get("kind").and_then(Value::as_str) {
        Some("bool") => Scalar::from(s["value"].as_bool().unwrap()),
        Some("int") => Scalar::Int(s["value"].as_i64().unwrap()),
        Some(_) => Scalar::Float(num(&s["value"])),
        None if s.is_i64() => Scalar::Int(s.as_i64().unwrap()),
        None => Scalar::Float(num(s)),
    }
}

/// Case `c`'s op on the inputs `t` (its other operand `t[1]`, or its
/// `scalar` argument where it has one).
pub fn apply(c: &Value, t: &[Tensor]) -> Result<Vec<Tensor>> {
    let a = &c["args"];
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    let other = || -> Operand<'_> {
        match a.get("scalar") {
            Some(s) => Operand::Scalar(scalar_arg(s)),
            None => Operand::Tensor(&t[1]),
        }
    };
    let x = &t[0];
    match c["op"].as_str().unwrap() {
        "erfinv" => one(x.erfinv()),
        "lgamma" => one(x.lgamma()),
        "digamma" => one(x.digamma()),
        "polygamma" => one(x.polygamma(a["n"].as_i64().unwrap())),
        "mvlgamma" => one(x.mvlgamma(a["p"].as_i64().unwrap())),
        "i0" => one(x.i0()),
        "special_i0e" => one(x.special_i0e()),
        "special_i1" => one(x.special_i1()),
        "special_i1e" => one(x.special_i1e()),
        "sinc" => one(x.sinc()),
        "special_entr" => one(x.special_entr()),
        "special_ndtr" => one(x.special_ndtr()),
        "special_ndtri" => one(x.special_ndtri()),
        "special_log_ndtr" => one(x.special_log_ndtr()),
        "special_erfcx" => one(x.special_erfcx()),
        "logit" => one(x.logit((!a["eps"].is_null()).then(|| num(&a["eps"])))),
        "signbit" => one(x.signbit()),
        "frexp" => x.frexp().map(|(m, e)| vec![m, e]),
        "rad2deg" => one(x.rad2deg()),
        "deg2rad" => one(x.deg2rad()),
        "angle" => one(x.angle()),
        "positive" => one(x.positive()),
        "isreal" => one(x.isreal()),
        "hypot" => one(x.hypot(&t[1])),
        "copysign" => one(x.copysign(other())),
        "nextafter" => one(x.nextafter(&t[1])),
        "fmax" => one(x.fmax(&t[1])),
        "fmin" => one(x.fmin(&t[1])),
        "xlog1py" => one(x.xlog1py(other())),
        "special_xlog1py" => one(x.special_xlog1py(other())),
        "heaviside" => one(x.heaviside(&t[1])),
        "gcd" => one(x.gcd(&t[1])),
        "lcm" => one(x.lcm(&t[1])),
        "bitwise_left_shift" => one(x.bitwise_left_shift(other())),
        "bitwise_right_shift" => one(x.bitwise_right_shift(other())),
        "ldexp" => one(x.ldexp(&t[1])),
        "float_power" => one(x.float_power(other())),
        "true_divide" => one(x.true_divide(other())),
        "floor_divide" => one(x.floor_divide(other())),
        "isclose" => one(x.isclose(
            &t[1],
            num(&a["rtol"]),
            num(&a["atol"]),
            a["equal_nan"].as_bool().unwrap(),
        )),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// The machine epsilon of a float dtype.
fn eps(d: DType) -> f64 {
    match d {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        DType::F32 => 2f64.powi(-23),
        _ => 2f64.powi(-52),
    }
}

/// The tolerance `(rel, abs)` of op `op`'s results of dtype `d` on the
/// CPU (`gpu`: on CUDA), `None` for bit for bit.
///
/// * Bit for bit: every integer or bool result, and every result of the
///   ops that are not special functions (`hypot`, `copysign`, `nextafter`,
///   `fmax`/`fmin`, `heaviside`, `frexp`, `signbit`, `ldexp`,
///   `float_power`, the divisions, `rad2deg`/`deg2rad`, `angle`, `isclose`,
///   ...): one correctly rounded operation, or glibc's `hypot`/`pow` on
///   both sides.
/// * The special functions (and `logit`, `xlog1py`, `sinc`) in f32/f64:
///   strata runs PyTorch's algorithms in its order of operations, with its
///   fused multiply-adds (PyTorch's CPU kernels are compiled with FMA
///   contraction: Cephes' `polevl`/`chbevl` and the erfinv and erfcx
///   polynomials are `mul_add`s here; without them 185 of 2,000 f64 `i1`
///   values differed), so most results are PyTorch's bits; what differs
///   are the C library functions under them (the `libm` crate's `lgamma`,
///   `erf`, `erfc` against glibc's; PyTorch's `::log`/`::sqrt` of floats
///   going through double in `ndtri`; the f64 Hurwitz zeta strata sums for
///   f32): 2 units in the last place, relative, and 2 ulps of 1 absolute
///   for results near a zero (`lgamma` near 1 and 2). `erfinv`: 8 (its
///   Newton steps divide `erf(x) - y` by a derivative that vanishes toward
///   ±1, where the two `erf`s differ by an ulp).
/// * The special functions in f16/bf16: `entr`, `ndtr`, `logit` and
///   `xlog1py` bit for bit: PyTorch's kernels round some of their steps to
///   the half type (c10's `std::log`, `std::erf` and arithmetic of
///   `Half`/`BFloat16` return that type), and strata rounds the same steps
///   (checked against PyTorch while writing them: `entr`, `ndtr` and
///   `logit` on all 65,536 values of each dtype, `logit` with `eps` and
///   `xlog1py` on 200,000 random operands). The others compute in f32 and round once, as PyTorch's
///   do, but their f32 values may differ in the last f32 places (above),
///   which can cross a rounding boundary of the dtype: 1 ulp of the dtype,
///   relative and of 1 absolute.
/// * On CUDA the device library's `lgammaf`, `erfinvf`, `erfcxf`,
///   `normcdfinvf`, `expf`, `logf` and `sinf` are other algorithms (within
///   2-6 ulps of the true value by CUDA's manual; the series and
///   recurrences carry more) and the f32 Hurwitz zeta is summed in f32, as
///   PyTorch's CUDA does: 2^12 f32 ulps (relative, and of 1 absolute), 256
///   f64 ulps, and 2 ulps of f16/bf16, for every float result.
fn tolerance(op: &str, d: DType, gpu: bool) -> Option<(f64, f64)> {
    if !d.is_float() {
        return None;
    }
    let e = eps(d);
    if gpu {
        return Some(match d {
            DType::F16 | DType::BF16 => (2.0 * e, 2.0 * e),
            DType::F32 => (4096.0 * e, 4096.0 * e),
            _ => (256.0 * e, 256.0 * e),
        });
    }
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
    if !special {
        return None;
    }
    let ulps = match d {
        // PyTorch's roundings to the half type, followed step by step.
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
    {
        Some("dtype")
    } else if msg.contains("negative n") || msg.contains("greater than or equal") {
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

/// How strata's answer to case `c` differs from PyTorch's, or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let gpu = device != Device::Cpu;
    let got = call(c, device);
    let Some(want) = c.get("results") else {
        let msg = c["error"].as_str().unwrap();
        return match got {
            Ok(_) if cpu_kernel_gap(c, device) => None,
            Ok(t) => Some(format!(
                "gave {:?} {:?}, PyTorch failed: {msg}",
                t[0].dtype(),
                t[0].shape()
            )),
            Err(e) => match expected_kind(msg) {
                Some(k) if k != kind(&e) => {
                    Some(format!("failed as {} ({e}), PyTorch: {msg}", kind(&e)))
                }
                _ => None,
            },
        };
    };
    let got = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(t) => t,
    };
    let op = c["op"].as_str().unwrap();
    for (t, w) in got.iter().zip(want.as_array().unwrap()) {
        let wd = dtype(w["dtype"].as_str().unwrap());
        let ws = shape(&w["shape"]);
        let g = t
            .to_dtype(DType::F64)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.to_vec::<f64>())
            .unwrap();
        let wv = crate::pytorch_fixture::nums(&w["data"]);
        let tol = tolerance(op, wd, gpu);
        let ok = t.dtype() == wd
            && t.shape() == ws.as_slice()
            && g.len() == wv.len()
            && g.iter().zip(&wv).all(|(&x, &y)| close(x, y, tol));
        if !ok {
            return Some(format!(
                "gave {:?} {:?} {g:?}, PyTorch {wd:?} {ws:?} {wv:?}",
                t.dtype(),
                t.shape()
            ));
        }
    }
    (got.len() != want.as_array().unwrap().len()).then(|| "a different number of results".into())
}

fn check(text: &str, device: Device) -> (usize, Vec<String>) {
    differing_cases(text, |c| difference(c, device))
}

#[test]
fn the_math_ops_of_session_79_match_pytorch() {
    check_fixture_and_probe(&TEXT, 6_000, "STRATA_S79_PROBE", |t| check(t, Device::Cpu));
}

/// Every op of the fixture, every dtype PyTorch accepts for it and every
/// refusal it makes are drawn: a generator change that dropped one fails here.
#[test]
fn the_fixture_covers_every_op_and_dtype() {
    let doc = fixture(&TEXT);
    let cases = doc["cases"].as_array().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for c in cases {
        let d = c["inputs"][0]["dtype"].as_str().unwrap();
        let outcome = if c.get("results").is_some() {
            "ok"
        } else {
            "error"
        };
        seen.insert(format!("{} {d} {outcome}", c["op"].as_str().unwrap()));
    }
    for must in [
        "gcd i64 ok",
        "gcd f32 error",
        "hypot i32 error",
        "hypot bf16 ok",
        "nextafter f16 ok",
        "nextafter i64 error",
        "special_ndtri f16 error",
        "special_erfcx bf16 error",
        "special_log_ndtr f64 ok",
        "frexp i32 error",
        "frexp bf16 ok",
        "polygamma f32 error",
        "mvlgamma bool error",
        "positive bool error",
        "bitwise_left_shift u8 ok",
        "bitwise_right_shift f32 error",
        "heaviside f16 ok",
        "lgamma u8 ok",
        "isclose i32 ok",
    ] {
        assert!(seen.contains(must), "the fixture has no case '{must}'");
    }
}

#[test]
fn a_few_values_by_hand() {
    let x = Tensor::from_slice(&[0.0f64, -0.0, -1.0, 1.0], &[4], Device::Cpu).unwrap();
    // digamma(±0) = ∓inf, NaN at the negative integers.
    let d = x.digamma().unwrap().to_vec::<f64>().unwrap();
    assert_eq!((d[0], d[1]), (f64::NEG_INFINITY, f64::INFINITY));
    assert!(d[2].is_nan());
    // lgamma at the non-positive integers is +inf.
    let l = x.lgamma().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(&l[..3], &[f64::INFINITY; 3]);
    assert!(x.polygamma(-1).is_err());
    let s = x.signbit().unwrap().to_vec::<bool>().unwrap();
    assert_eq!(s, vec![false, true, true, false]);
    // The shifts of PyTorch: out of range gives 0 (left) or the sign (right).
    let i = Tensor::from_slice(&[1i32, -128], &[2], Device::Cpu).unwrap();
    let k = Tensor::from_slice(&[32i32, 40], &[2], Device::Cpu).unwrap();
    assert_eq!(
        i.bitwise_left_shift(&k).unwrap().to_vec::<i32>().unwrap(),
        vec![0, 0]
    );
    assert_eq!(
        i.bitwise_right_shift(&k).unwrap().to_vec::<i32>().unwrap(),
        vec![0, -1]
    );
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn the_math_ops_of_session_79_match_pytorch_on_a_gpu() {
    let gpu = crate::hostile_calls::gpu();
    check_fixture_and_probe(&TEXT, 6_000, "STRATA_S79_PROBE", |t| check(t, gpu));
}

/// `mvlgamma` sums its terms a block of `p` at a time where the `[..., p]`
/// tensor of arguments would pass 2^24 elements (so that a huge `p` does not
/// exhaust memory): 2^18 elements with p = 80 take two blocks. The sum is
/// checked against `lgamma(x - j / 2)` summed over `j` one term at a time,
/// plus `p (p - 1) / 4 log(pi)`.
#[test]
fn mvlgamma_in_blocks_of_p_is_the_sum_of_its_terms() {
    let n = 1usize << 18;
    let p = 80i64;
    let x = Tensor::rand(&[n], DType::F64, 79, Device::Cpu)
        .unwrap()
        .mul(10.0)
        .unwrap()
        .add(40.0)
        .unwrap();
    let got = x.mvlgamma(p).unwrap().to_vec::<f64>().unwrap();
    let mut want = vec![p as f64 * (p as f64 - 1.0) * 0.25 * std::f64::consts::PI.ln(); n];
    for j in 0..p {
        let term = x.sub(j as f64 * 0.5).unwrap().lgamma().unwrap();
        for (w, t) in want.iter_mut().zip(term.to_vec::<f64>().unwrap()) {
            *w += t;
        }
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-12 * w.abs(), "element {i}: {g} vs {w}");
    }
}
