//! Helper-105: what the session-56 conformance sweep found
//! (`fuzz_conformance_core.py` / `fuzz_conformance_ops.py` seeds 3314-3319,
//! `fuzz_conformance_s55.py` seeds 3320-3323, with
//! `STRATA_CONFORMANCE_STRIDES=1` and `STRATA_CONFORMANCE_EXACT=1`), checked
//! against PyTorch 2.15's answers in `tests/data/fuzz_s56.json.gz`, written
//! by `benches/anchors/gen_fuzz_s56.py` (CPU, one thread, AVX2).
//!
//! - Layouts: PyTorch's TensorIterator lays out the result of an
//!   element-wise op in the order of its operands' strides (a transposed
//!   input gives a transposed result), `empty_like`/`zeros_like`/
//!   `ones_like`/`full_like` keep the input's dense layout; strata made them
//!   all row-major (730 of the sweep's 16,000 programs: `x.t() + 1`,
//!   `x.t().lt(0)`, `torch.where(c, x.t(), y)`, `zeros_like(x.t())`, ...).
//!   `masked_fill`, `triu`/`tril` and `pow(scalar, x)` stay row-major, as
//!   in PyTorch. `clone()` and `to(dtype)` kept strata's row-major copies
//!   then (PyTorch's keep the layout; since session 59 strata's do too,
//!   `strides_s59.rs`).
//! - `F.mse_loss(x, y, weight=w)` with a bool operand: PyTorch's weighted
//!   form subtracts the operands and fails (bool `-`); strata converted them
//!   first and succeeded.
//! - f32 exact GELU was not PyTorch's bit for bit: PyTorch calls oneDNN's
//!   kernel for a contiguous tensor of two elements or more and its own
//!   `GeluKernelImpl` (vectorised erf; glibc's `erff` in its scalar
//!   functor) for any other; strata computed erf in f64 for all.

use crate::pytorch_fixture::{dtype, fixture, gunzip, ints, num, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, GeluApprox, Reduction, Scalar, Tensor, TensorError};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/fuzz_s56.json.gz"))));

/// A fixture value as f64 (a bool as 0 or 1).
fn number(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        v => num(v),
    }
}

/// A fixture operand: the view of its base storage.
fn operand(spec: &Value) -> Tensor {
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let base: Vec<f64> = spec["base"]
        .as_array()
        .unwrap()
        .iter()
        .map(number)
        .collect();
    let t = Tensor::from_slice(&base, &[base.len()], Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    t.as_strided(
        &ints(&spec["size"]),
        &ints(&spec["stride"]),
        Some(spec["offset"].as_i64().unwrap()),
    )
    .unwrap()
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        v => Scalar::Float(num(v)),
    }
}

fn opt_dtype(args: &Value) -> Option<DType> {
    args.get("dtype").and_then(Value::as_str).map(dtype)
}

/// strata's answer to a layout case.
fn run(op: &str, xs: &[Tensor], args: &Value) -> Result<Tensor, TensorError> {
    let a = &xs[0];
    let second = || match xs.get(1) {
        Some(t) => strata_tensor::Operand::Tensor(t),
        None => strata_tensor::Operand::Scalar(scalar(&args["scalar"])),
    };
    match op {
        "neg" => a.neg(),
        "abs" => a.abs(),
        "exp" => a.exp(),
        "sqrt" => a.sqrt(),
        "sigmoid" => a.sigmoid(),
        "relu" => a.relu(),
        "sign" => a.sign(),
        "silu" => a.silu(),
        "gelu" => a.gelu(GeluApprox::None),
        "clamp" => {
            let b = |k: &str| (!args[k].is_null()).then(|| scalar(&args[k]));
            a.clamp(b("lo"), b("hi"))
        }
        "add" => a.add(second()),
        "sub" => a.sub(second()),
        "mul" => a.mul(second()),
        "div" => a.div(second()),
        "lt" => a.lt(second()),
        "eq" => a.eq(second()),
        "maximum" => a.maximum(&xs[1]),
        "pow" => a.pow(second()),
        "scalar_pow" => Tensor::scalar_pow(scalar(&args["scalar"]), a),
        "where" => {
            let pick = |i: usize, k: &str| match xs.get(i) {
                Some(t) => strata_tensor::Operand::Tensor(t),
                None => strata_tensor::Operand::Scalar(scalar(&args[k])),
            };
            Tensor::where_cond(a, pick(1, "a"), pick(2, "b"))
        }
        "addcmul" => a.addcmul(&xs[1], &xs[2], scalar(&args["value"])),
        "zeros_like" => a.zeros_like(opt_dtype(args)),
        "ones_like" => a.ones_like(opt_dtype(args)),
        "empty_like" => a.empty_like(opt_dtype(args)),
        "full_like" => a.full_like(scalar(&args["value"]), opt_dtype(args)),
        "mse_loss" => a.mse_loss(&xs[1], Reduction::None, xs.get(2)),
        "masked_fill" => a.masked_fill(&xs[1], scalar(&args["value"])),
        "triu" => a.triu(args["diagonal"].as_i64().unwrap()),
        _ => panic!("unknown op {op}"),
    }
}

#[test]
fn elementwise_and_like_results_are_laid_out_as_pytorch_lays_them_out() {
    let cases = FIXTURE["layouts"].as_array().unwrap();
    let mut bad = Vec::new();
    let mut transposed = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let xs: Vec<Tensor> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(operand)
            .collect();
        let y = match run(c["op"].as_str().unwrap(), &xs, &c["args"]) {
            Ok(y) => y,
            Err(e) => {
                bad.push(format!("{name}: {e}"));
                continue;
            }
        };
        let want = &c["out"];
        if y.shape() != shape(&want["shape"]).as_slice()
            || y.dtype() != dtype(want["dtype"].as_str().unwrap())
        {
            bad.push(format!("{name}: {:?} {:?}", y.shape(), y.dtype()));
            continue;
        }
        // Strides of dims of size 1 are free (FORMAT.md section 5).
        let strides = ints(&want["strides"]);
        let differs =
            (0..y.ndim()).any(|d| y.shape()[d] > 1 && y.strides()[d] as i64 != strides[d]);
        if differs {
            bad.push(format!(
                "{name}: strides {:?}, PyTorch's {strides:?}",
                y.strides()
            ));
        }
        transposed += usize::from(!y.is_contiguous());
        let Some(values) = want.get("values") else {
            continue;
        };
        let want_v: Vec<f64> = values.as_array().unwrap().iter().map(number).collect();
        let got = y.to_vec_as::<f64>().unwrap();
        let exact = want["exact"].as_bool().unwrap();
        let close = |g: f64, w: f64| {
            (g.is_nan() && w.is_nan())
                || g == w
                || (!exact && (g - w).abs() <= 1e-6 * w.abs().max(1e-30))
        };
        if let Some(k) = (0..want_v.len()).find(|&k| !close(got[k], want_v[k])) {
            bad.push(format!(
                "{name}: element {k}: {} vs PyTorch's {}",
                got[k], want_v[k]
            ));
        }
    }
    assert!(cases.len() >= 200, "{}", cases.len());
    assert!(
        bad.is_empty(),
        "{} of {}:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
    // Most cases' results are not row-major (they were all row-major before).
    assert!(transposed >= 100, "{transposed}");
}

#[test]
fn weighted_mse_loss_of_a_bool_operand_is_a_dtype_error_as_in_pytorch() {
    let cases = FIXTURE["errors"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let dts: Vec<&str> = c["dtypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ts: Vec<Tensor> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&dts)
            .map(|(v, dt)| {
                let vals: Vec<f64> = v.as_array().unwrap().iter().map(number).collect();
                Tensor::from_slice(&vals, &[vals.len()], Device::Cpu)
                    .unwrap()
                    .to_dtype(dtype(dt))
                    .unwrap()
            })
            .collect();
        for red in [Reduction::None, Reduction::Sum, Reduction::Mean] {
            let r = ts[0].mse_loss(&ts[1], red, Some(&ts[2]));
            assert!(
                matches!(r, Err(TensorError::DType { .. })),
                "{name} ({red:?}): {r:?}; PyTorch: {}",
                c["torch_message"]
            );
        }
        // Without a weight PyTorch's kernel converts both operands: no error.
        let y = ts[0].mse_loss(&ts[1], Reduction::None, None).unwrap();
        assert_eq!(y.dtype(), DType::F32, "{name}");
    }
}

// ----- f32 GELU ---------------------------------------------------------

fn hex32(s: &str) -> Vec<u32> {
    s.as_bytes()
        .chunks(8)
        .map(|c| u32::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

fn f32_tensor(bits: &[u32]) -> Tensor {
    let v: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    Tensor::from_slice(&v, &[v.len()], Device::Cpu).unwrap()
}

/// `t`'s f32 patterns in row-major order, every NaN as 0x7fc00000.
fn canonical_bits(t: &Tensor) -> Vec<u32> {
    canonical(
        &t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
    )
}

fn canonical(b: &[u32]) -> Vec<u32> {
    b.iter()
        .map(|&b| {
            if f32::from_bits(b).is_nan() {
                0x7fc0_0000
            } else {
                b
            }
        })
        .collect()
}

fn fnv(b: &[u32]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in b {
        for byte in v.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// F.gelu of the 1-D f32 patterns `x` (a multiple of 16 of them) through
/// PyTorch's three paths: a contiguous tensor (oneDNN), rows of 16 cut out
/// of rows of 32 (the vectorised loop), a stepped view (the scalar functor).
fn gelu_paths(x: &[u32]) -> [Vec<u32>; 3] {
    let n = x.len();
    let gelu = |t: &Tensor| t.gelu(GeluApprox::None).unwrap();
    let contiguous = canonical_bits(&gelu(&f32_tensor(x)));
    let mut wide = vec![0u32; 2 * n];
    for (r, row) in x.chunks(16).enumerate() {
        wide[32 * r..32 * r + 16].copy_from_slice(row);
    }
    let rows = f32_tensor(&wide)
        .as_strided(&[n as i64 / 16, 16], &[32, 1], Some(0))
        .unwrap();
    let vectorised = canonical_bits(&gelu(&rows));
    let mut every_other = vec![0u32; 2 * n];
    for (k, &b) in x.iter().enumerate() {
        every_other[2 * k] = b;
    }
    let stepped = f32_tensor(&every_other)
        .as_strided(&[n as i64], &[2], Some(0))
        .unwrap();
    let scalar = canonical_bits(&gelu(&stepped));
    [contiguous, vectorised, scalar]
}

#[test]
fn f32_gelu_is_pytorchs_bit_for_bit_on_its_three_paths() {
    let g = &FIXTURE["gelu"];
    // The chosen values: specials, NaN payloads, subnormals, huge values,
    // and values where the paths differ.
    let v = &g["values"];
    let x = hex32(v["x"].as_str().unwrap());
    let got = gelu_paths(&x);
    for (k, path) in ["onednn", "vectorised", "scalar"].iter().enumerate() {
        let want = canonical(&hex32(v[*path].as_str().unwrap()));
        let bad: Vec<String> = (0..x.len())
            .filter(|&i| got[k][i] != want[i])
            .take(10)
            .map(|i| {
                format!(
                    "gelu({:e} = {:08x}) = {:08x}, PyTorch {:08x}",
                    f32::from_bits(x[i]),
                    x[i],
                    got[k][i],
                    want[i]
                )
            })
            .collect();
        assert!(bad.is_empty(), "{path} path:\n{}", bad.join("\n"));
    }
    // A sweep of 2^20 patterns over every exponent, by hash.
    let s = &g["sweep"];
    let m = s["multiplier"].as_u64().unwrap();
    let pats: Vec<u32> = (0..s["n"].as_u64().unwrap())
        .map(|i| (i.wrapping_mul(m) & 0xffff_ffff) as u32)
        .collect();
    let got = gelu_paths(&pats);
    for (k, path) in ["onednn", "vectorised", "scalar"].iter().enumerate() {
        assert_eq!(
            fnv(&got[k]),
            s[*path].as_str().unwrap(),
            "{path} path of the sweep"
        );
    }
    // The paths do differ (so each one is checked on its own).
    let differ = |a: &[u32], b: &[u32]| a.iter().zip(b).filter(|(x, y)| x != y).count() as u64;
    let d = &s["differ"];
    assert_eq!(
        differ(&got[0], &got[2]),
        d["onednn_scalar"].as_u64().unwrap()
    );
    assert_eq!(
        differ(&got[1], &got[2]),
        d["vectorised_scalar"].as_u64().unwrap()
    );
    assert_eq!(
        differ(&got[0], &got[1]),
        d["onednn_vectorised"].as_u64().unwrap()
    );
}

#[test]
fn f32_gelu_by_layout_is_pytorchs_bit_for_bit() {
    let cases = FIXTURE["gelu"]["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let x = f32_tensor(&hex32(c["base"].as_str().unwrap()))
            .as_strided(
                &ints(&c["size"]),
                &ints(&c["stride"]),
                Some(c["offset"].as_i64().unwrap()),
            )
            .unwrap();
        let y = x.gelu(GeluApprox::None).unwrap();
        let want = canonical(&hex32(c["out"].as_str().unwrap()));
        let got = canonical_bits(&y);
        let strides = ints(&c["strides"]);
        if (0..y.ndim()).any(|d| y.shape()[d] > 1 && y.strides()[d] as i64 != strides[d]) {
            bad.push(format!(
                "{name}: strides {:?}, PyTorch's {strides:?}",
                y.strides()
            ));
        }
        let diffs: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
        if let Some(&i) = diffs.first() {
            bad.push(format!(
                "{name}: {} of {} differ, first at {i}: {:08x} vs PyTorch {:08x}",
                diffs.len(),
                want.len(),
                got[i],
                want[i]
            ));
        }
    }
    assert!(cases.len() >= 40, "{}", cases.len());
    assert!(
        bad.is_empty(),
        "{} of {}:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}
