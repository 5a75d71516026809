//! Session 80: a hostile-input sweep of the linalg, shape, statistics and
//! nn ops session 79 added, against PyTorch 2.15's CPU
//! (`benches/anchors/gen_hostile_s80.py`): empty matrices and empty
//! batches, 0-d and 1-d operands, non-square and mismatched shapes,
//! integer, bool, f16 and bf16 operands to linalg, NaN- and inf-filled
//! matrices (singular, not positive-definite, whose SVD does not
//! converge), orders and norms of every kind (0, ±inf, NaN, negative),
//! matrix powers at the ends of int64, dims, indices and offsets out of
//! range or at the ends of int64, sizes and counts that overflow, `q`
//! outside [0, 1], pool kernels larger than their input, groups that do
//! not divide the channels, out-of-range targets and unpooling indices.
//!
//! A linalg case's `check` narrows what is compared (the generator says
//! why): "shapes" compares the outcome, dtypes and shapes but not values
//! that rounding decides (null-space vectors, the smallest singular value
//! of a singular matrix); "lenient", for factorizations of non-finite
//! values, whose NaN patterns and failures are LAPACK's, asks only for no
//! panic or hang and, where both answer, the same dtypes and shapes.
//!
//! Where PyTorch failed only because its allocation did not fit the
//! machine that ran it ("can't allocate memory"), the case asks what
//! "lenient" asks: that is the machine's limit, not a rule, and a request
//! the OS refuses on one machine may be granted (and then fill memory) on
//! another; strata may answer where it needs less memory
//! (`local_response_norm` of a huge size, below).
//!
//! Each case is replayed by the dispatcher of the session 79 test that
//! covers its op (`linalg_s79::call`, `shape_stats_s79::call`), on a thread
//! of its own: a panic or a call that runs past a time limit (a size that
//! was not refused before allocating or looping) is a failure. Where
//! PyTorch fails strata must fail (with PyTorch's words for a singular
//! matrix and one that is not positive-definite); where PyTorch answers
//! strata must give its dtypes, shapes and values: linalg results within
//! linalg_s79's tolerance (scaled by the result's largest magnitude),
//! the others within conformance/FORMAT.md's tolerance of their dtype.

use crate::pytorch_fixture::{close, dtype, fixture, gunzip, nums, shape, tolerance};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::{mpsc, LazyLock};
use std::time::Duration;
use strata_tensor::linalg;
use strata_tensor::{DType, Device, Result, Tensor, TensorError};

const CPU: Device = Device::Cpu;

/// How long one call may run (the slowest listed call takes milliseconds).
const LIMIT: Duration = Duration::from_secs(20);

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/hostile_s80.json.gz"))));

fn call(c: &Value) -> Result<Vec<Tensor>> {
    match c["family"].as_str().unwrap() {
        "linalg" => crate::linalg_s79::call(c, CPU),
        _ => crate::shape_stats_s79::call(c, CPU),
    }
}

/// A result's dtype, shape and values (as f64), or the error's message,
/// or why there is neither.
type Outcome = std::result::Result<Vec<(DType, Vec<usize>, Vec<f64>)>, String>;

/// `call(c)` on a thread of its own: `Err` says it panicked or hung.
fn run(c: &Value) -> std::result::Result<Outcome, &'static str> {
    let c = c.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let got: Outcome = call(&c)
            .and_then(|ys| {
                ys.iter()
                    .map(|y| {
                        let v = y.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
                        Ok((y.dtype(), y.shape().to_vec(), v))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .map_err(|e: TensorError| e.to_string());
        let _ = tx.send(got);
    });
    match rx.recv_timeout(LIMIT) {
        Ok(o) => Ok(o),
        Err(mpsc::RecvTimeoutError::Timeout) => Err("hung (ran past the time limit)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked"),
    }
}

/// Where strata's answer to case `c` differs from PyTorch's, or `None`.
fn difference(c: &Value) -> Option<String> {
    let got = match run(c) {
        Ok(g) => g,
        Err(why) => return Some(why.into()),
    };
    let check = c["check"].as_str();
    let out_of_memory = c["error"]
        .as_str()
        .is_some_and(|e| e.contains("can't allocate memory"));
    let lenient = check == Some("lenient") || out_of_memory;
    let Some(want) = c.get("results") else {
        let msg = c["error"].as_str().unwrap();
        return match got {
            Ok(_) if lenient => None,
            Ok(ys) => Some(format!(
                "gave {:?}, PyTorch failed: {msg}",
                ys.iter().map(|y| (y.0, &y.1)).collect::<Vec<_>>()
            )),
            // PyTorch's words for a singular matrix and one that is not
            // positive-definite (which pivot or minor rounding makes zero
            // may differ).
            Err(e) => ["singular", "positive-definite"]
                .iter()
                .find(|w| msg.contains(*w) && !e.contains(*w))
                .map(|w| format!("error {e} does not say {w}; PyTorch: {msg}")),
        };
    };
    let ys = match got {
        Err(_) if lenient => return None,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(ys) => ys,
    };
    let want = want.as_array().unwrap();
    if ys.len() != want.len() {
        return Some(format!("{} outputs, PyTorch {}", ys.len(), want.len()));
    }
    let op = c["op"].as_str().unwrap();
    for (k, ((gd, gs, g), w)) in ys.iter().zip(want).enumerate() {
        let wd = dtype(w["dtype"].as_str().unwrap());
        let ws = shape(&w["shape"]);
        let wv = nums(&w["data"]);
        let ok = if check.is_some() {
            true
        } else if c["family"] == "linalg" {
            let big = wv
                .iter()
                .filter(|v| v.is_finite())
                .fold(0.0f64, |m, v| m.max(v.abs()));
            let vectors = matches!((op, k), ("svd", 0) | ("svd", 2) | ("eigh", 1));
            let t = match wd {
                DType::F32 if vectors => 5e-3,
                DType::F64 => 1e-9,
                d if d.is_float() => 2e-4,
                _ => 0.0,
            };
            g.len() == wv.len()
                && g.iter().zip(&wv).all(|(&x, &y)| {
                    x == y
                        || (x.is_nan() && y.is_nan())
                        || (x.is_finite() && y.is_finite() && (x - y).abs() <= t * (y.abs() + big))
                })
        } else {
            let tol = wd.is_float().then(|| tolerance(wd));
            g.len() == wv.len() && g.iter().zip(&wv).all(|(&x, &y)| close(x, y, tol))
        };
        if !(ok && *gd == wd && gs == &ws) {
            let cut = |v: &[f64]| format!("{:?}", &v[..v.len().min(24)]);
            return Some(format!(
                "output {k}: gave {gd:?} {gs:?} {}, PyTorch {wd:?} {ws:?} {}",
                cut(g),
                cut(&wv)
            ));
        }
    }
    None
}

/// Every listed hostile call agrees with PyTorch: the same error-or-not,
/// dtypes, shapes and values; no panic, no hang.
#[test]
fn hostile_calls_of_session_79_linalg_shape_and_nn_ops_match_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 4_000, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            if std::env::var_os("STRATA_H80_TRACE").is_some() {
                eprintln!("case {i}: {} ({}) {}", c["op"], c["note"], c["args"]);
            }
            difference(c).map(|w| {
                format!(
                    "case {i}: {} ({}) {} {}: {w}",
                    c["op"],
                    c["note"],
                    c["args"],
                    inputs_str(c)
                )
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad
            .len()
            .min(if std::env::var_os("STRATA_H80_ALL").is_some() {
                usize::MAX
            } else {
                80
            })]
            .join("\n")
    );
}

fn inputs_str(c: &Value) -> String {
    c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}{}{}",
                i["dtype"].as_str().unwrap(),
                i["shape"],
                if i["t"] == true { "ᵀ" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `matrix_power` by i64::MIN: PyTorch 2.15 negates the power (it
/// overflows) and loops without end (gen_hostile_s80.py leaves these calls
/// out); strata must answer at once: `A^(2^63)` of the inverse, by the same
/// binary powering as every other power.
#[test]
fn matrix_power_by_i64_min_answers_at_once() {
    let eye = Tensor::eye(2, None, DType::F64, CPU).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let id = linalg::matrix_power(&eye, i64::MIN).map(|t| t.to_vec::<f64>().unwrap());
        let neg =
            linalg::matrix_power(&eye.neg().unwrap(), i64::MIN).map(|t| t.to_vec::<f64>().unwrap());
        let empty =
            linalg::matrix_power(&Tensor::zeros(&[0, 0], DType::F64, CPU).unwrap(), i64::MIN)
                .map(|t| t.shape().to_vec());
        let _ = tx.send((id, neg, empty));
    });
    let (id, neg, empty) = rx
        .recv_timeout(LIMIT)
        .expect("answers without hanging or panicking");
    assert_eq!(id.unwrap(), [1.0, 0.0, 0.0, 1.0]);
    // (-I)^(-2^63) = I: an even power.
    assert_eq!(neg.unwrap(), [1.0, 0.0, 0.0, 1.0]);
    assert_eq!(empty.unwrap(), [0, 0]);
}

/// `F.instance_norm` does not check `eps` (PyTorch 2.15: 0 and negative
/// values are used as given, NaN where `var + eps < 0`), while
/// `F.batch_norm` in training refuses `eps <= 0`. Values from PyTorch 2.15
/// for `[[[1, 2, 3, 4]]]` (mean 2.5, biased variance 1.25).
#[test]
fn instance_norm_takes_any_eps_as_pytorch_and_batch_norm_still_checks_it() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4], Device::Cpu).unwrap();
    let norm = |eps: f64| {
        x.instance_norm(None, None, None, None, true, 0.1, eps)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    let want0 = [-1.341_640_8f32, -0.447_213_65, 0.447_213_53, 1.341_640_7];
    for (g, w) in norm(0.0).iter().zip(want0) {
        assert!((g - w).abs() <= 1e-6, "{g} vs {w}");
    }
    for (g, w) in norm(-0.25).iter().zip([-1.5f32, -0.5, 0.5, 1.5]) {
        assert!((g - w).abs() <= 1e-6, "{g} vs {w}");
    }
    assert!(norm(-2.0).iter().all(|v| v.is_nan()));
    let err = x.batch_norm(None, None, None, None, true, 0.1, 0.0);
    assert!(matches!(err, Err(TensorError::Value { .. })), "{err:?}");
}

/// `local_response_norm` of a size whose window holds every channel is
/// each channel's sum of squares over `size`: at size 2^32, where
/// PyTorch's padding asks for 192 GiB (and fails on a machine that lacks
/// it), strata answers from that sum (here checked against the formula
/// in f64) without allocating the padding.
#[test]
fn local_response_norm_of_a_huge_size_needs_no_padding() {
    let values: Vec<f64> = (0..24).map(f64::from).collect();
    let x = Tensor::from_slice(&values, &[2, 4, 3], Device::Cpu).unwrap();
    let (size, alpha, beta, k) = (1i64 << 32, 1e-4, 0.75, 1.0);
    let got = x
        .local_response_norm(size, alpha, beta, k)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for (i, g) in got.iter().enumerate() {
        let (n, l) = (i / 12, i % 3);
        let squares: f64 = (0..4).map(|c| values[n * 12 + c * 3 + l].powi(2)).sum();
        let want = values[i] / (k + alpha * squares / size as f64).powf(beta);
        assert!(
            (g - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{i}: {g} vs {want}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `local_response_norm` against its definition on random f64 inputs:
    /// each channel divided by `(k + alpha * S / size)^beta`, `S` the sum
    /// of squares over the channels `c - size/2 ..= c + (size-1)/2` that
    /// exist. Sizes run from 1 to past twice the channels, so both the
    /// padded pool and the whole-window sum (every window holding every
    /// channel) are taken, and 3-D and 4-D inputs both.
    #[test]
    fn local_response_norm_is_its_windowed_sum(
        n in 1usize..3, c in 1usize..7, l in 1usize..4, four_d in any::<bool>(),
        size_over in 0usize..15, alpha in 1e-3f64..2.0, beta in 0.1f64..2.0, k in 0.5f64..2.0,
        seed in any::<u64>(),
    ) {
        let size = size_over % (2 * c + 3) + 1;
        let shape: Vec<usize> = if four_d { vec![n, c, l, 2] } else { vec![n, c, l] };
        let inner: usize = shape[2..].iter().product();
        let count = n * c * inner;
        let mut state = seed | 1;
        let values: Vec<f64> = (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f64 / 500.0 - 2.0
            })
            .collect();
        let x = Tensor::from_slice(&values, &shape, Device::Cpu).unwrap();
        let got = x
            .local_response_norm(size as i64, alpha, beta, k)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let (lo, hi) = (size / 2, (size - 1) / 2);
        for (i, g) in got.iter().enumerate() {
            let (b, ch, at) = (i / (c * inner), i / inner % c, i % inner);
            let first = ch.saturating_sub(lo);
            let last = (ch + hi).min(c - 1);
            let squares: f64 = (first..=last)
                .map(|j| values[(b * c + j) * inner + at].powi(2))
                .sum();
            let want = values[i] / (k + alpha * squares / size as f64).powf(beta);
            prop_assert!((g - want).abs() <= 1e-12 * want.abs().max(1.0), "{i}: {g} vs {want}");
        }
    }
}
