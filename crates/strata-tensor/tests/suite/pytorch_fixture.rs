//! Reading PyTorch's answers (the JSON fixtures `benches/anchors/gen_*.py`
//! write, the larger ones gzipped, and values pasted beside a test) and
//! comparing with them bit for bit: numbers (non-finite ones as the strings
//! "nan", "inf", "-inf"), shapes, dtype names, tensors built from exact
//! values. strata-autograd's suite includes this file as the base of its own
//! `pytorch_fixture`.

use serde_json::Value;
use std::io::Read;
use strata_tensor::{DType, Device, Tensor};

/// A gzipped fixture's JSON text, from its bytes (`include_bytes!` of a
/// `.json.gz`, which a test decompresses once, in a `LazyLock`).
pub fn gunzip(bytes: &[u8]) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .expect("the fixture is gzipped UTF-8");
    text
}

/// A fixture file's JSON text (gunzipped where its name ends in `.gz`).
pub fn read_fixture_file(path: &str) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.ends_with(".gz") {
        gunzip(&bytes)
    } else {
        String::from_utf8(bytes).expect("the fixture is UTF-8")
    }
}

/// f64 values from their bit patterns written as 16 hex digits each.
pub fn hexes(s: &str) -> Vec<f64> {
    s.as_bytes()
        .chunks(16)
        .map(|c| f64::from_bits(u64::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap()))
        .collect()
}

/// 16-bit patterns (f16/bf16 values) written as 4 hex digits each.
pub fn hex16(s: &str) -> Vec<u16> {
    s.as_bytes()
        .chunks(4)
        .map(|c| u16::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

/// A JSON array of integers.
pub fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// A fixture's JSON text, parsed.
pub fn fixture(text: &str) -> Value {
    serde_json::from_str(text).expect("the fixture parses")
}

/// A fixture number ("nan", "inf", "-inf" as strings).
pub fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => panic!("not a number: {s}"),
        },
        v => v.as_f64().expect("a number"),
    }
}

/// An array of fixture numbers.
pub fn nums(v: &Value) -> Vec<f64> {
    v.as_array().expect("an array").iter().map(num).collect()
}

/// A fixture shape.
pub fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("a shape")
        .iter()
        .map(|d| d.as_u64().expect("a size") as usize)
        .collect()
}

/// A dtype as the generators name it (strata's or PyTorch's name).
pub fn dtype(name: &str) -> DType {
    match name {
        "f32" | "float32" => DType::F32,
        "f64" | "float64" => DType::F64,
        "f16" | "float16" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "i32" | "int32" => DType::I32,
        "i64" | "int64" => DType::I64,
        "u8" | "uint8" => DType::U8,
        "bool" => DType::Bool,
        _ => panic!("dtype {name}"),
    }
}

/// `v` (each exactly a value of `dt`) as a tensor of `shape` and `dt`.
pub fn tensor_of(v: &[f64], shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

/// `v` as a 1-d tensor of `dt` ([`tensor_of`]).
pub fn tensor(v: &[f64], dt: DType) -> Tensor {
    tensor_of(v, &[v.len()], dt)
}

/// `t`'s elements as f64 (exact for every float dtype).
pub fn host(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// Bit for bit, as f64 (NaN equal to NaN).
pub fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Checks a fixture's `text` with `check` (which returns the number of
/// cases and a line for each that differs): at least `min` cases, all as
/// PyTorch answered them. Where the environment variable `probe` names a
/// file (another draw of the fixture's generator, plain or gzipped), that
/// file is checked the same way first.
pub fn check_fixture_and_probe(
    text: &str,
    min: usize,
    probe: &str,
    check: impl Fn(&str) -> (usize, Vec<String>),
) {
    if let Ok(path) = std::env::var(probe) {
        let (n, bad) = check(&read_fixture_file(&path));
        assert!(
            bad.is_empty(),
            "{} of {n} cases of {path} differ: {:#?}",
            bad.len(),
            &bad[..bad.len().min(30)]
        );
        eprintln!("{path}: {n} cases, all equal");
    }
    let (n, bad) = check(text);
    assert!(n >= min);
    assert!(
        bad.is_empty(),
        "{} of {n} cases differ: {bad:#?}",
        bad.len()
    );
}
