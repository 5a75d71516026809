//! layer_norm's backward on the CPU against PyTorch 2.15's bits (session 56;
//! fixture `tests/data/layer_norm_bw_s56.json.gz`, written by
//! `benches/anchors/gen_layer_norm_bw_s56.py` with one thread).
//!
//! `Var::layer_norm` then `backward_with(dy)`: the input's, weight's and
//! bias's gradients bit for bit, for f32, f64, f16 and bf16 inputs with
//! parameters of their own dtype, f16/bf16 inputs with f32 parameters,
//! every weight/bias combination, rows of 1 to 4097 elements (below, at and
//! past the vector sizes 4, 8 and 16), 1 to 64 rows, and rows holding inf,
//! NaN, -inf, a constant row with eps 0 (rstd inf) and a row of -0.0. The
//! weight's and bias's gradients are PyTorch's with one thread (its kernel
//! keeps one buffer per thread, so they depend on the thread count).

use crate::pytorch_fixture::{dtype, fixture, gunzip, hexes};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static DOC: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/layer_norm_bw_s56.json.gz"))));

const M64: u64 = u64::MAX;

/// The generator's `a + b * u` draws (u uniform in [0, 1) from splitmix64),
/// rounded to f32 unless `dt` is f64, then to `dt`.
fn splitmix(seed: u64, kind: &str, count: usize, dt: DType) -> Tensor {
    let span = &DOC["spans"][kind];
    let (a, b) = (span[0].as_f64().unwrap(), span[1].as_f64().unwrap());
    let mut state = seed;
    let vals: Vec<f64> = (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15) & M64;
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            a + b * ((z >> 11) as f64 * 2f64.powi(-53))
        })
        .collect();
    let t = Tensor::from_slice(&vals, &[count], Device::Cpu).unwrap();
    if dt == DType::F64 {
        t
    } else {
        t.to_dtype(DType::F32).unwrap().to_dtype(dt).unwrap()
    }
}

/// The bits of an f16 value given exactly as an f64.
fn f16_bits(v: f64) -> u16 {
    let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
    let a = v.abs();
    if a.is_nan() {
        return 0x7e00;
    }
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    if a < 2f64.powi(-14) {
        return sign | (a * 2f64.powi(24)) as u16;
    }
    let e = a.log2().floor() as i32;
    let e = if 2f64.powi(e) > a { e - 1 } else { e };
    let m = ((a / 2f64.powi(e) - 1.0) * 1024.0) as u16;
    sign | (((e + 15) as u16) << 10) | m
}

/// `t`'s elements as the hex bit patterns of its dtype (16, 8 or 4 digits).
fn hex_of(t: &Tensor) -> String {
    let v = t.to_vec_as::<f64>().unwrap();
    match t.dtype() {
        DType::F64 => v.iter().map(|x| format!("{:016x}", x.to_bits())).collect(),
        DType::F32 => v
            .iter()
            .map(|&x| format!("{:08x}", (x as f32).to_bits()))
            .collect(),
        DType::BF16 => v
            .iter()
            .map(|&x| format!("{:04x}", (x as f32).to_bits() >> 16))
            .collect(),
        _ => v.iter().map(|&x| format!("{:04x}", f16_bits(x))).collect(),
    }
}

/// FNV-1a (64-bit) of an ASCII string, as the generator's `fnv`.
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for c in text.bytes() {
        h = (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01B3);
    }
    format!("{h:016x}")
}

/// The tensor of `dt` whose bits `hex` holds.
fn of_hex(hex: &str, dt: DType, shape: &[usize]) -> Tensor {
    let v: Vec<f64> = match dt {
        DType::F64 => hexes(hex),
        DType::F32 => hex
            .as_bytes()
            .chunks(8)
            .map(|c| {
                f64::from(f32::from_bits(
                    u32::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap(),
                ))
            })
            .collect(),
        DType::BF16 => hex
            .as_bytes()
            .chunks(4)
            .map(|c| {
                let b = u32::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap();
                f64::from(f32::from_bits(b << 16))
            })
            .collect(),
        _ => hex
            .as_bytes()
            .chunks(4)
            .map(|c| f16_value(u16::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap()))
            .collect(),
    };
    Tensor::from_slice(&v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

fn f16_value(b: u16) -> f64 {
    let s = if b & 0x8000 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (i32::from((b >> 10) & 31), f64::from(b & 1023));
    match e {
        0 => s * m * 2f64.powi(-24),
        31 if m == 0.0 => s * f64::INFINITY,
        31 => f64::NAN,
        _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// `got` against PyTorch's record (hex, or `{fnv, head}`): `None` if the
/// same, else a description of the first difference.
fn differs(got: &Tensor, want: &Value) -> Option<String> {
    let h = hex_of(got);
    let digits = h.len() / got.numel().max(1);
    let first_diff = |w: &str| {
        let (a, b) = (h.as_bytes(), w.as_bytes());
        (0..w.len() / digits)
            .find(|&i| a[i * digits..(i + 1) * digits] != b[i * digits..(i + 1) * digits])
            .map(|i| {
                format!(
                    "element {i}: strata {}, PyTorch {}",
                    &h[i * digits..(i + 1) * digits],
                    &w[i * digits..(i + 1) * digits]
                )
            })
    };
    match want {
        Value::String(w) => {
            // NaN is NaN whatever its payload.
            let nan = |s: &str| match digits {
                16 => f64::from_bits(u64::from_str_radix(s, 16).unwrap()).is_nan(),
                8 => f32::from_bits(u32::from_str_radix(s, 16).unwrap()).is_nan(),
                _ => {
                    let b = u16::from_str_radix(s, 16).unwrap();
                    if got.dtype() == DType::BF16 {
                        b & 0x7f80 == 0x7f80 && b & 0x7f != 0
                    } else {
                        b & 0x7c00 == 0x7c00 && b & 0x3ff != 0
                    }
                }
            };
            (0..w.len() / digits)
                .find(|&i| {
                    let (a, b) = (
                        &h[i * digits..(i + 1) * digits],
                        &w[i * digits..(i + 1) * digits],
                    );
                    a != b && !(nan(a) && nan(b))
                })
                .map(|i| {
                    format!(
                        "element {i}: strata {}, PyTorch {}",
                        &h[i * digits..(i + 1) * digits],
                        &w[i * digits..(i + 1) * digits]
                    )
                })
        }
        _ => {
            if fnv(&h) == want["fnv"].as_str().unwrap() {
                return None;
            }
            let head = want["head"].as_str().unwrap();
            Some(first_diff(head).unwrap_or_else(|| "past the first 64 elements".into()))
        }
    }
}

/// Runs layer_norm forward and backward; the three gradients.
fn grads(
    x: &Tensor,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    dy: &Tensor,
    eps: f64,
) -> [Option<Tensor>; 3] {
    let n = x.shape()[1];
    let xv = Var::parameter(x.clone()).unwrap();
    let wv = w.map(|w| Var::parameter(w.clone()).unwrap());
    let bv = b.map(|b| Var::parameter(b.clone()).unwrap());
    let y = xv.layer_norm(&[n], wv.as_ref(), bv.as_ref(), eps).unwrap();
    y.backward_with(Some(dy), false).unwrap();
    [
        xv.grad(),
        wv.and_then(|w| w.grad()),
        bv.and_then(|b| b.grad()),
    ]
}

/// Compares the three gradients with the case's; one line per difference.
fn compare(c: &Value, got: [Option<Tensor>; 3], label: &str, bad: &mut Vec<String>) {
    for (name, g) in ["dx", "dw", "db"].iter().zip(got) {
        match (g, &c[*name]) {
            (None, Value::Null) => {}
            (Some(g), w) if !w.is_null() => {
                if let Some(d) = differs(&g, w) {
                    bad.push(format!("{label} {name}: {d}"));
                }
            }
            (g, w) => bad.push(format!("{label} {name}: strata {g:?}, PyTorch {w}")),
        }
    }
}

/// `t` as a view with a storage offset: the last `t.shape()[0]` rows (or
/// elements) of a tensor with `extra` more in front.
fn offset_view(t: &Tensor, extra: usize) -> Tensor {
    let mut shape = t.shape().to_vec();
    let per: usize = shape[1..].iter().product();
    let mut v = vec![7.5; extra * per];
    v.extend(t.to_vec_as::<f64>().unwrap());
    shape[0] += extra;
    Tensor::from_slice(&v, &shape, Device::Cpu)
        .unwrap()
        .to_dtype(t.dtype())
        .unwrap()
        .narrow(0, extra as i64, t.shape()[0] as i64)
        .unwrap()
}

#[test]
fn layer_norm_backward_is_pytorchs_bit_for_bit() {
    assert_eq!(DOC["threads"].as_u64(), Some(1));
    let cases = DOC["cases"].as_array().unwrap();
    assert!(cases.len() >= 300, "{} cases", cases.len());
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (dt, pdt) = (
            dtype(c["dtype"].as_str().unwrap()),
            dtype(c["param"].as_str().unwrap()),
        );
        let (rows, n) = (
            c["rows"].as_u64().unwrap() as usize,
            c["n"].as_u64().unwrap() as usize,
        );
        let seed = |k: &str| c["seeds"][k].as_str().unwrap().parse::<u64>().unwrap();
        let x = splitmix(seed("x"), c["kind"].as_str().unwrap(), rows * n, dt)
            .reshape(&[rows as i64, n as i64])
            .unwrap();
        let label = format!(
            "{}/{} [{rows}, {n}] weight {} bias {} {}",
            c["dtype"], c["param"], c["weight"], c["bias"], c["kind"]
        );
        assert_eq!(
            fnv(&hex_of(&x)),
            c["x_fnv"].as_str().unwrap(),
            "{label}: the input"
        );
        let dy = splitmix(seed("dy"), "grad", rows * n, dt)
            .reshape(&[rows as i64, n as i64])
            .unwrap();
        let w = (c["weight"] == true).then(|| splitmix(seed("w"), "weight", n, pdt));
        let b = (c["bias"] == true).then(|| splitmix(seed("b"), "weight", n, pdt));
        let got = grads(&x, w.as_ref(), b.as_ref(), &dy, c["eps"].as_f64().unwrap());
        compare(c, got, &label, &mut bad);
        if i % 5 == 0 {
            // The same operands as views that start past their storage's
            // first element.
            let (x, dy) = (offset_view(&x, 1), offset_view(&dy, 2));
            let (w, b) = (w.map(|w| offset_view(&w, 3)), b.map(|b| offset_view(&b, 1)));
            let got = grads(&x, w.as_ref(), b.as_ref(), &dy, c["eps"].as_f64().unwrap());
            compare(c, got, &format!("{label} (offset views)"), &mut bad);
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn layer_norm_backward_of_special_rows_is_pytorchs() {
    let cases = DOC["specials"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut bad = Vec::new();
    for c in cases {
        let (dt, pdt) = (
            dtype(c["dtype"].as_str().unwrap()),
            dtype(c["param"].as_str().unwrap()),
        );
        let (rows, n) = (
            c["rows"].as_u64().unwrap() as usize,
            c["n"].as_u64().unwrap() as usize,
        );
        let t = |k: &str, d: DType, s: &[usize]| c[k].as_str().map(|h| of_hex(h, d, s));
        let x = t("x", dt, &[rows, n]).unwrap();
        let dy = t("dy", dt, &[rows, n]).unwrap();
        let (w, b) = (t("w", pdt, &[n]), t("b", pdt, &[n]));
        let got = grads(&x, w.as_ref(), b.as_ref(), &dy, c["eps"].as_f64().unwrap());
        let label = format!(
            "special {}/{} N {n} weight {}",
            c["dtype"], c["param"], c["weight"]
        );
        compare(c, got, &label, &mut bad);
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}
