//! Reading PyTorch's answers (the JSON fixtures `benches/anchors/gen_*.py`
//! write, the larger ones gzipped, and values pasted beside a test) and
//! comparing with them bit for bit: numbers (non-finite ones as the strings
//! "nan", "inf", "-inf"), shapes, dtype names, tensors built from exact
//! values. strata-autograd's suite includes this file as the base of its own
//! `pytorch_fixture`.

use serde_json::Value;
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};
use strata_tensor::{DType, Device, Result, Tensor};

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
/// With `STRATA_FIXTURE_PROGRESS` set, says on stderr which case is about
/// to run (to find the case a GPU run stops at).
pub fn progress(i: usize, c: &Value) {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var_os("STRATA_FIXTURE_PROGRESS").is_some());
    if *ON {
        eprintln!("case {i}: {} {}", c["op"], c["args"]);
    }
}

/// The cases of fixture `text` that `difference` finds different, each
/// named by its index, op, arguments and inputs, in case order, and how
/// many cases there are (under `STRATA_FIXTURE_PROGRESS` each is said
/// before it runs). The cases run on up to 16 threads: on a GPU most of a
/// cold replay is NVRTC compiling each op's kernels, which threads do side
/// by side.
pub fn differing_cases(
    text: &str,
    difference: impl Fn(&Value) -> Option<String> + Sync,
) -> (usize, Vec<String>) {
    let doc = fixture(text);
    let cases = doc["cases"].as_array().unwrap();
    let next = AtomicUsize::new(0);
    let found = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = cases.get(i) else { break };
                progress(i, c);
                if let Some(w) = difference(c) {
                    let line = format!(
                        "case {i}: {} {} inputs {}: {w}",
                        c["op"],
                        c["args"],
                        serde_json::to_string(&c["inputs"]).unwrap()
                    );
                    found.lock().unwrap().push((i, line));
                }
            });
        }
    });
    let mut found = found.into_inner().unwrap();
    found.sort_by_key(|f| f.0);
    (cases.len(), found.into_iter().map(|f| f.1).collect())
}

/// Whether case `c` is a failure of PyTorch's CPU that is a kernel its CPU
/// lacks ("... not implemented for 'Half'"), replayed on a GPU: that is not
/// a rule, PyTorch's CUDA build may have the kernel, so a GPU replay takes
/// an answer or a failure (session 81's shape_stats_s79 replay on an H100
/// differed only in five such cases, f16 `local_response_norm` of 5-D
/// inputs). strata's CPU refuses them as PyTorch's does.
pub fn cpu_kernel_gap(c: &Value, device: Device) -> bool {
    device != Device::Cpu
        && c["error"]
            .as_str()
            .is_some_and(|e| e.contains("not implemented for"))
}

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

// ----- session 74: the element-wise fixtures (math, activations, losses, norms) -----

/// The tensor a fixture record describes (the transpose of its stored base
/// where `t` says so) on `device`.
pub fn input(d: &Value, device: Device) -> Tensor {
    let dt = dtype(d["dtype"].as_str().unwrap());
    let sh = shape(&d["shape"]);
    let vals = d["values"].as_array().unwrap();
    let base = match dt {
        DType::Bool => {
            let v: Vec<bool> = vals.iter().map(|x| x.as_bool().unwrap()).collect();
            Tensor::from_slice(&v, &sh, device).unwrap()
        }
        DType::I32 | DType::I64 | DType::U8 => {
            let v: Vec<i64> = vals.iter().map(|x| x.as_i64().unwrap()).collect();
            Tensor::from_slice(&v, &sh, device)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        }
        _ => {
            let v: Vec<f64> = vals.iter().map(num).collect();
            Tensor::from_slice(&v, &sh, device)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        }
    };
    if d["t"].as_bool().unwrap() {
        base.t().unwrap()
    } else {
        base
    }
}

/// conformance/FORMAT.md's tolerance (rtol, atol) for a result of `dt`.
pub fn tolerance(dt: DType) -> (f64, f64) {
    match dt {
        DType::F16 => (2f64.powi(-9), 2f64.powi(-10)),
        DType::BF16 => (2f64.powi(-6), 2f64.powi(-7)),
        DType::F64 => (1e-12, 1e-14),
        _ => (1e-5, 1e-6),
    }
}

/// Whether `got` is `want` (NaN matching NaN) or, with a tolerance
/// `(rtol, atol)`, finite and within it.
pub fn close(got: f64, want: f64, tol: Option<(f64, f64)>) -> bool {
    if got == want || (got.is_nan() && want.is_nan()) {
        return true;
    }
    match tol {
        Some((r, a)) if got.is_finite() && want.is_finite() => {
            (got - want).abs() <= a + r * want.abs()
        }
        _ => false,
    }
}

/// Where strata's answer `got` differs from what PyTorch recorded for case
/// `c` (its `result`: dtype, shape and values, or `error`), or `None`;
/// `tol` gives the tolerance of the result's dtype (`None`: bit for bit).
pub fn result_difference(
    got: Result<Tensor>,
    c: &Value,
    tol: impl Fn(DType) -> Option<(f64, f64)>,
) -> Option<String> {
    let Some(want) = c.get("result") else {
        return got.ok().map(|t| {
            format!(
                "gave {:?} {:?}, PyTorch failed: {}",
                t.dtype(),
                t.shape(),
                c["error"]
            )
        });
    };
    let t = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(t) => t,
    };
    let wd = dtype(want["dtype"].as_str().unwrap());
    let ws = shape(&want["shape"]);
    let g = t
        .to_dtype(DType::F64)
        .and_then(|t| t.contiguous())
        .and_then(|t| t.to_vec::<f64>())
        .unwrap();
    let w = nums(&want["data"]);
    let tol = tol(wd);
    let ok = t.dtype() == wd
        && t.shape() == ws.as_slice()
        && g.len() == w.len()
        && g.iter().zip(&w).all(|(&a, &b)| close(a, b, tol));
    (!ok).then(|| {
        format!(
            "gave {:?} {:?} {g:?}, PyTorch {wd:?} {ws:?} {w:?}",
            t.dtype(),
            t.shape()
        )
    })
}

/// Fails, listing the first twelve, if any of `cases` (more than
/// `at_least` of them) differs; `describe` names a case.
pub fn assert_cases_agree<'a>(
    cases: impl IntoIterator<Item = &'a Value>,
    at_least: usize,
    describe: impl Fn(&Value) -> String,
    difference: impl Fn(&Value) -> Option<String>,
) {
    let cases: Vec<&Value> = cases.into_iter().collect();
    assert!(cases.len() > at_least, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| difference(c).map(|w| format!("case {i}: {}: {w}", describe(c))))
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(12)].join("\n")
    );
}

// ----- session 80: the replay helpers the session 78/79 modules had copied -----

/// An integer argument that may be `null`.
pub fn opt_i(v: &Value) -> Option<i64> {
    v.as_i64()
}

/// A fixture number that may be `null`.
pub fn opt_num(v: &Value) -> Option<f64> {
    (!v.is_null()).then(|| num(v))
}

/// A list of dims that may be `null`.
pub fn opt_ints(v: &Value) -> Option<Vec<i64>> {
    v.as_array()
        .map(|a| a.iter().map(|d| d.as_i64().unwrap()).collect())
}

/// `tensor_split`'s sections (a number) or indices (a list).
pub fn split_of(v: &Value) -> strata_tensor::TensorSplit {
    match v.as_i64() {
        Some(n) => strata_tensor::TensorSplit::Sections(n),
        None => strata_tensor::TensorSplit::Indices(ints(v)),
    }
}

/// A norm order as the linalg generators store it (`null`, `"fro"`,
/// `"nuc"`, a number, `"inf"`).
pub fn ord_of(v: &Value) -> Option<strata_tensor::linalg::NormOrd> {
    use strata_tensor::linalg::NormOrd;
    match v {
        Value::Null => None,
        Value::String(s) if s == "fro" => Some(NormOrd::Fro),
        Value::String(s) if s == "nuc" => Some(NormOrd::Nuc),
        v => Some(NormOrd::P(num(v))),
    }
}

/// The upstream gradient the shape/statistics generators use for an
/// output of `shape`: element `j` is `((3 j) mod 7) / 2 - 1.5` (used by
/// strata-autograd's suite).
#[allow(dead_code)]
pub fn upstream(shape: &[usize], dt: DType, device: Device) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let u: Vec<f64> = (0..n).map(|j| ((3 * j) % 7) as f64 / 2.0 - 1.5).collect();
    Tensor::from_slice(&u, shape, device)?.to_dtype(dt)
}

/// A hostile sweep's input ([`input`]'s record, then `expand`ed to a shape
/// or every `step`-th element along dim 0), or a `pattern`: a tensor of
/// `shape` and `dtype` whose element `i` is `((7919 i + seed) mod 23) / 4 -
/// 11 / 4`.
pub fn build_input(d: &Value, device: Device) -> Tensor {
    if let Some(p) = d.get("pattern") {
        let sh = shape(&p["shape"]);
        let seed = p["seed"].as_u64().unwrap();
        let n: usize = sh.iter().product();
        let v: Vec<f64> = (0..n as u64)
            .map(|i| ((i * 7919 + seed) % 23) as f64 / 4.0 - 11.0 / 4.0)
            .collect();
        return Tensor::from_slice(&v, &sh, device)
            .unwrap()
            .to_dtype(dtype(p["dtype"].as_str().unwrap()))
            .unwrap();
    }
    let mut t = input(d, device);
    if let Some(e) = d.get("expand") {
        let sizes: Vec<i64> = shape(e).iter().map(|&s| s as i64).collect();
        t = t.expand(&sizes).unwrap();
    }
    if let Some(step) = d.get("step") {
        t = t.i(strata_tensor::s![..; step.as_i64().unwrap()]).unwrap();
    }
    t
}
