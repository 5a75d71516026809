//! Session 77: `searchsorted`, `bucketize`, `bincount`, `histc`, `unique`,
//! `unique_consecutive`, `meshgrid`, `cartesian_prod`, `diff`, `cdist`,
//! `tril_indices` and `triu_indices` against PyTorch 2.15's CPU
//! (`benches/anchors/gen_search_unique_s77.py`: every dtype, 0-d and empty
//! shapes, ties, signed zeros, NaN and ±inf, hostile arguments). strata must
//! fail where PyTorch fails, give its dtypes, shapes and values where it
//! does not (integers and counts exactly; cdist within
//! conformance/FORMAT.md's tolerance: PyTorch sums in another order), and
//! leave every input as it was (values and version counter), failing or
//! not. Then properties against direct loops.

use crate::pytorch_fixture::{
    assert_cases_agree, close, dtype, fixture, gunzip, input, num, nums, read_fixture_file, shape,
    tolerance,
};
use proptest::prelude::*;
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Operand, Result, Scalar, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/search_unique_s77.json.gz"))));

/// The keys under which a case stores its input tensors.
const INPUTS: [&str; 8] = [
    "x",
    "v",
    "sorter",
    "boundaries",
    "w",
    "x2",
    "prepend",
    "append",
];

/// A case's input tensors, by key (`xs` as `xs0`, `xs1`, ...).
fn inputs(c: &Value, device: Device) -> Vec<(String, Tensor)> {
    let mut out: Vec<(String, Tensor)> = INPUTS
        .iter()
        .filter_map(|&k| c.get(k).map(|d| (k.to_string(), input(d, device))))
        .collect();
    if let Some(xs) = c.get("xs").and_then(Value::as_array) {
        for (i, d) in xs.iter().enumerate() {
            out.push((format!("xs{i}"), input(d, device)));
        }
    }
    out
}

fn call(c: &Value, t: &[(String, Tensor)], device: Device) -> Result<Vec<Tensor>> {
    let get = |k: &str| t.iter().find(|(n, _)| n == k).map(|(_, x)| x);
    let x = || get("x").expect("the case has an input x");
    let a = &c["args"];
    let flag = |k: &str| a[k].as_bool().unwrap();
    let int = |k: &str| a[k].as_i64().unwrap();
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    match c["op"].as_str().unwrap() {
        "searchsorted" => {
            let values: Operand = match c.get("scalar") {
                Some(s) if s["kind"] == "int" => {
                    Operand::Scalar(Scalar::from(s["value"].as_i64().unwrap()))
                }
                Some(s) => Operand::Scalar(Scalar::from(num(&s["value"]))),
                None => Operand::Tensor(get("v").unwrap()),
            };
            one(x().searchsorted(
                values,
                flag("out_int32"),
                flag("right"),
                a["side"].as_str(),
                get("sorter"),
            ))
        }
        "bucketize" => {
            one(x().bucketize(get("boundaries").unwrap(), flag("out_int32"), flag("right")))
        }
        "bincount" => one(x().bincount(get("w"), int("minlength"))),
        "histc" => one(x().histc(int("bins"), num(&a["min"]), num(&a["max"]))),
        op @ ("unique" | "unique_consecutive") => {
            let dim = a["dim"].as_i64();
            let (inv, cnt) = (flag("return_inverse"), flag("return_counts"));
            let u = if op == "unique" {
                x().unique(flag("sorted"), inv, cnt, dim)?
            } else {
                x().unique_consecutive(inv, cnt, dim)?
            };
            assert_eq!((u.inverse.is_some(), u.counts.is_some()), (inv, cnt));
            Ok([Some(u.values), u.inverse, u.counts]
                .into_iter()
                .flatten()
                .collect())
        }
        op @ ("meshgrid" | "cartesian_prod") => {
            let xs: Vec<&Tensor> = t
                .iter()
                .filter(|(n, _)| n.starts_with("xs"))
                .map(|(_, x)| x)
                .collect();
            if op == "meshgrid" {
                Tensor::meshgrid(&xs, a["indexing"].as_str().unwrap())
            } else {
                one(Tensor::cartesian_prod(&xs))
            }
        }
        "diff" => one(x().diff(int("n"), int("dim"), get("prepend"), get("append"))),
        "cdist" => one(x().cdist(get("x2").unwrap(), num(&a["p"]))),
        op @ ("tril_indices" | "triu_indices") => {
            let dt = a["dtype"].as_str().map(dtype);
            let f = if op == "tril_indices" {
                Tensor::tril_indices
            } else {
                Tensor::triu_indices
            };
            one(f(int("row"), int("col"), int("offset"), dt, device))
        }
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// Where strata's answer differs from PyTorch's for case `c`, or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let t = inputs(c, device);
    let before: Vec<(Vec<f64>, u64)> = t
        .iter()
        .map(|(_, x)| (x.to_vec_as::<f64>().unwrap(), x.version()))
        .collect();
    let got = match catch_unwind(AssertUnwindSafe(|| call(c, &t, device))) {
        Ok(g) => g,
        Err(_) => return Some("panicked".into()),
    };
    for ((name, x), (vals, version)) in t.iter().zip(&before) {
        let now = x.to_vec_as::<f64>().unwrap();
        let same =
            now.len() == vals.len() && now.iter().zip(vals).all(|(a, b)| close(*a, *b, None));
        if !same || x.version() != *version {
            return Some(format!("input {name} changed"));
        }
    }
    let want = match c.get("results") {
        None => {
            return got.ok().map(|ys| {
                let shapes: Vec<_> = ys.iter().map(|y| (y.dtype(), y.shape().to_vec())).collect();
                format!("gave {shapes:?}, PyTorch failed: {}", c["error"])
            })
        }
        Some(w) => w.as_array().unwrap(),
    };
    let ys = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(ys) => ys,
    };
    if ys.len() != want.len() {
        return Some(format!("{} outputs, PyTorch {}", ys.len(), want.len()));
    }
    for (k, (y, w)) in ys.iter().zip(want).enumerate() {
        let wd = dtype(w["dtype"].as_str().unwrap());
        let ws = shape(&w["shape"]);
        let wv = nums(&w["data"]);
        let g = y.contiguous().unwrap().to_vec_as::<f64>().unwrap();
        // Exact, except distances (PyTorch's order of summing) and f32
        // bincount weights on a GPU (added atomically, in any order).
        let tol = match c["op"].as_str().unwrap() {
            "cdist" => Some(tolerance(wd)),
            "bincount" if device != Device::Cpu && wd.is_float() => Some(tolerance(wd)),
            _ => None,
        };
        let ok = y.dtype() == wd
            && y.shape() == ws.as_slice()
            && g.len() == wv.len()
            && g.iter().zip(&wv).all(|(&a, &b)| close(a, b, tol));
        if !ok {
            return Some(format!(
                "output {k}: gave {:?} {:?} {g:?}, PyTorch {wd:?} {ws:?} {wv:?}",
                y.dtype(),
                y.shape()
            ));
        }
    }
    None
}

fn all_agree_on(device: Device) {
    // Another draw of the generator (its second argument, a seed) first.
    if let Ok(path) = std::env::var("STRATA_S77_PROBE") {
        let probe = fixture(&read_fixture_file(&path));
        agree(probe["cases"].as_array().unwrap(), 0, device);
        eprintln!("{path}: all agree");
    }
    agree(FIXTURE["cases"].as_array().unwrap(), 3_000, device);
}

/// Every case agrees (more than `at_least` of them); a case that does not
/// is described by its op and its arguments, long lists cut short.
fn agree(cases: &[Value], at_least: usize, device: Device) {
    assert_cases_agree(
        cases,
        at_least,
        |c| {
            let mut d = c.clone();
            for k in ["results", "x", "v", "w", "x2", "xs", "sorter", "boundaries"] {
                if let Some(v) = d.get_mut(k) {
                    let s = v.to_string();
                    *v = Value::String(s.chars().take(160).collect());
                }
            }
            format!("{}\n    {d}", c["op"])
        },
        |c| difference(c, device),
    );
}

#[test]
fn search_count_unique_grid_ops_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn search_count_unique_grid_ops_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

// ----- properties against direct loops -----

fn t64(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
}

fn ti64(v: &[i64]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.contiguous().unwrap().to_vec_as::<i64>().unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.contiguous().unwrap().to_vec_as::<f64>().unwrap()
}

/// Small values with many ties.
fn small() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(-4i64..6, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// searchsorted of a sorted sequence is the linear scan's count of
    /// elements `< v` (left) or `<= v` (right); through a sorter the same
    /// for the sorted values; bucketize is searchsorted.
    #[test]
    fn searchsorted_is_a_linear_scan(mut seq in small(), vals in small(), right: bool, shuffle: u64) {
        let mut sorted = seq.clone();
        sorted.sort();
        let want: Vec<i64> = vals
            .iter()
            .map(|&v| sorted.iter().filter(|&&s| if right { s <= v } else { s < v }).count() as i64)
            .collect();
        let s = ti64(&sorted);
        let v = ti64(&vals);
        prop_assert_eq!(i64s(&s.searchsorted(&v, false, right, None, None).unwrap()), want.clone());
        let b = v.bucketize(&s, true, right).unwrap();
        prop_assert_eq!(b.dtype(), DType::I32);
        prop_assert_eq!(i64s(&b), want.clone());
        // An unsorted sequence with its sorter.
        let n = seq.len();
        if n > 1 {
            for i in 0..n {
                seq.swap(i, (shuffle as usize).wrapping_mul(31).wrapping_add(i * 7) % n);
            }
        }
        let u = ti64(&seq);
        let order = u.argsort(0, false, true).unwrap();
        let got = u.searchsorted(&v, false, right, None, Some(&order)).unwrap();
        prop_assert_eq!(i64s(&got), want);
    }

    /// Rows of an N-D sequence search their own row.
    #[test]
    fn searchsorted_rows_search_their_own_row(rows in 1usize..4, n in 0usize..9, m in 0usize..6, seed: u64) {
        let vals: Vec<f64> = (0..rows * n).map(|i| ((i as u64 * 7 + seed) % 11) as f64 - 5.0).collect();
        let seq = Tensor::from_slice(&vals, &[rows, n], Device::Cpu).unwrap().sort(1, false, true).unwrap().0;
        let q: Vec<f64> = (0..rows * m).map(|i| ((i as u64 * 5 + seed / 3) % 13) as f64 - 6.5).collect();
        let qt = Tensor::from_slice(&q, &[rows, m], Device::Cpu).unwrap();
        let got = i64s(&seq.searchsorted(&qt, false, false, None, None).unwrap());
        let s = f64s(&seq);
        for r in 0..rows {
            for j in 0..m {
                let want = s[r * n..(r + 1) * n].iter().filter(|&&x| x < q[r * m + j]).count() as i64;
                prop_assert_eq!(got[r * m + j], want);
            }
        }
    }

    /// unique: sorted distinct values, counts summing to numel that are the
    /// loop's counts, `values[inverse]` giving back the input.
    #[test]
    fn unique_counts_and_inverse_rebuild_the_input(x in small()) {
        let t = ti64(&x);
        let u = t.unique(true, true, true, None).unwrap();
        let values = i64s(&u.values);
        let inverse = i64s(u.inverse.as_ref().unwrap());
        let counts = i64s(u.counts.as_ref().unwrap());
        let mut want = x.clone();
        want.sort();
        want.dedup();
        prop_assert_eq!(&values, &want);
        prop_assert_eq!(counts.iter().sum::<i64>(), x.len() as i64);
        for (v, c) in values.iter().zip(&counts) {
            prop_assert_eq!(*c, x.iter().filter(|&&e| e == *v).count() as i64);
        }
        for (e, i) in x.iter().zip(&inverse) {
            prop_assert_eq!(values[*i as usize], *e);
        }
    }

    /// unique_consecutive against the run-length loop; unique along dim 0
    /// of pairs against sorting and deduplicating the pairs.
    #[test]
    fn unique_consecutive_and_unique_dim_match_loops(x in small()) {
        let t = ti64(&x);
        let u = t.unique_consecutive(false, true, None).unwrap();
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for &e in &x {
            match runs.last_mut() {
                Some((v, c)) if *v == e => *c += 1,
                _ => runs.push((e, 1)),
            }
        }
        prop_assert_eq!(i64s(&u.values), runs.iter().map(|r| r.0).collect::<Vec<_>>());
        prop_assert_eq!(i64s(u.counts.as_ref().unwrap()), runs.iter().map(|r| r.1).collect::<Vec<_>>());
        let pairs: Vec<[i64; 2]> = x.chunks_exact(2).map(|p| [p[0] % 3, p[1] % 2]).collect();
        if !pairs.is_empty() {
            let flat: Vec<i64> = pairs.iter().flatten().copied().collect();
            let m = Tensor::from_slice(&flat, &[pairs.len(), 2], Device::Cpu).unwrap();
            let u = m.unique(true, true, true, Some(0)).unwrap();
            let mut want = pairs.clone();
            want.sort();
            want.dedup();
            prop_assert_eq!(i64s(&u.values), want.iter().flatten().copied().collect::<Vec<_>>());
            let inv = i64s(u.inverse.as_ref().unwrap());
            for (p, i) in pairs.iter().zip(&inv) {
                prop_assert_eq!(&want[*i as usize], p);
            }
            prop_assert_eq!(i64s(u.counts.as_ref().unwrap()).iter().sum::<i64>(), pairs.len() as i64);
        }
    }

    /// bincount against the loop, with and without weights.
    #[test]
    fn bincount_is_the_counting_loop(x in prop::collection::vec(0i64..12, 0..40), minlength in 0i64..20) {
        let t = ti64(&x);
        let bins = x.iter().map(|&v| v + 1).max().unwrap_or(0).max(minlength) as usize;
        let bins = if x.is_empty() { minlength as usize } else { bins };
        let mut counts = vec![0i64; bins];
        let mut sums = vec![0.0f64; bins];
        let w: Vec<f64> = (0..x.len()).map(|i| i as f64 * 0.25 - 3.0).collect();
        for (i, &v) in x.iter().enumerate() {
            counts[v as usize] += 1;
            sums[v as usize] += w[i];
        }
        prop_assert_eq!(i64s(&t.bincount(None, minlength).unwrap()), counts);
        let got = t.bincount(Some(&t64(&w)), minlength).unwrap();
        if !x.is_empty() {
            prop_assert_eq!(got.dtype(), DType::F64);
            prop_assert_eq!(f64s(&got), sums);
        }
    }

    /// histc of f64 against the loop that bins `(x - lo) * bins / (hi - lo)`.
    #[test]
    fn histc_is_the_binning_loop(
        x in prop::collection::vec(-20.0f64..20.0, 0..50),
        bins in 1i64..12,
        lo in -15.0f64..0.0,
        width in 0.5f64..25.0,
    ) {
        let hi = lo + width;
        let got = f64s(&t64(&x).histc(bins, lo, hi).unwrap());
        let mut want = vec![0.0; bins as usize];
        for &e in &x {
            if e >= lo && e <= hi {
                let b = (((e - lo) * bins as f64 / (hi - lo)) as usize).min(bins as usize - 1);
                want[b] += 1.0;
            }
        }
        prop_assert_eq!(got, want);
    }

    /// diff against the differences' loop, n times.
    #[test]
    fn diff_is_repeated_differences(x in small(), n in 0i64..5) {
        let mut want = x.clone();
        for _ in 0..n {
            want = want.windows(2).map(|w| w[1] - w[0]).collect();
        }
        prop_assert_eq!(i64s(&ti64(&x).diff(n, 0, None, None).unwrap()), want);
    }

    /// cdist against the norm loop (f64; p = 0, 1, 2, 3, inf).
    #[test]
    fn cdist_is_the_norm_loop(r1 in 1usize..5, r2 in 1usize..5, c in 1usize..4, seed: u64, pi in 0usize..5) {
        let p = [0.0, 1.0, 2.0, 3.0, f64::INFINITY][pi];
        let a: Vec<f64> = (0..r1 * c).map(|i| ((i as u64 * 13 + seed) % 17) as f64 / 4.0 - 2.0).collect();
        let b: Vec<f64> = (0..r2 * c).map(|i| ((i as u64 * 11 + seed / 7) % 19) as f64 / 4.0 - 2.0).collect();
        let ta = Tensor::from_slice(&a, &[r1, c], Device::Cpu).unwrap();
        let tb = Tensor::from_slice(&b, &[r2, c], Device::Cpu).unwrap();
        let got = f64s(&ta.cdist(&tb, p).unwrap());
        for i in 0..r1 {
            for j in 0..r2 {
                let d = (0..c).map(|k| (a[i * c + k] - b[j * c + k]).abs());
                let want = if p == 0.0 {
                    d.filter(|&x| x != 0.0).count() as f64
                } else if p.is_infinite() {
                    d.fold(0.0, f64::max)
                } else {
                    d.map(|x| x.powf(p)).sum::<f64>().powf(1.0 / p)
                };
                prop_assert!((got[i * r2 + j] - want).abs() <= 1e-12 * (1.0 + want), "{} vs {}", got[i * r2 + j], want);
            }
        }
    }

    /// tril/triu indices against the nested loop over the matrix.
    #[test]
    fn triangle_indices_are_the_nested_loop(row in 0i64..9, col in 0i64..9, offset in -12i64..12) {
        let mut lower = (vec![], vec![]);
        let mut upper = (vec![], vec![]);
        for r in 0..row {
            for c in 0..col {
                if c - r <= offset {
                    lower.0.push(r);
                    lower.1.push(c);
                }
                if c - r >= offset {
                    upper.0.push(r);
                    upper.1.push(c);
                }
            }
        }
        let l = Tensor::tril_indices(row, col, offset, None, Device::Cpu).unwrap();
        prop_assert_eq!(l.shape(), &[2, lower.0.len()]);
        prop_assert_eq!(i64s(&l), [lower.0, lower.1].concat());
        let u = Tensor::triu_indices(row, col, offset, None, Device::Cpu).unwrap();
        prop_assert_eq!(i64s(&u), [upper.0, upper.1].concat());
    }

    /// meshgrid's grid i holds tensor i's element at its own coordinate;
    /// cartesian_prod lists the same tuples row by row.
    #[test]
    fn meshgrid_and_cartesian_prod_index_like_loops(sizes in prop::collection::vec(0usize..4, 1..4), xy: bool) {
        let ts: Vec<Tensor> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| ti64(&(0..n as i64).map(|i| 10 * k as i64 + i).collect::<Vec<_>>()))
            .collect();
        let refs: Vec<&Tensor> = ts.iter().collect();
        let grids = Tensor::meshgrid(&refs, if xy { "xy" } else { "ij" }).unwrap();
        let total: usize = sizes.iter().product();
        let prod = i64s(&Tensor::cartesian_prod(&refs).unwrap());
        prop_assert_eq!(prod.len(), total * sizes.len());
        let mut coords = vec![0usize; sizes.len()];
        for row in 0..total {
            // Row-major coordinates in "ij" order.
            let mut rem = row;
            for d in (0..sizes.len()).rev() {
                coords[d] = rem % sizes[d];
                rem /= sizes[d];
            }
            for (k, g) in grids.iter().enumerate() {
                let mut at = coords.clone();
                if xy && sizes.len() >= 2 {
                    at.swap(0, 1);
                }
                let gs = g.shape().to_vec();
                let mut flat = 0;
                for (d, &i) in at.iter().enumerate() {
                    flat = flat * gs[d] + i;
                }
                prop_assert_eq!(i64s(g)[flat], 10 * k as i64 + coords[k] as i64);
                if sizes.len() > 1 {
                    prop_assert_eq!(prod[row * sizes.len() + k], 10 * k as i64 + coords[k] as i64);
                }
            }
        }
    }
}

/// Arguments at the integers' extremes give typed errors or PyTorch's
/// answers, never a panic or a wrapped size.
#[test]
fn extreme_arguments_fail_cleanly() {
    let cpu = Device::Cpu;
    // Offsets past either side of the matrix: all or nothing.
    let tri = |upper: bool| {
        if upper {
            Tensor::triu_indices
        } else {
            Tensor::tril_indices
        }
    };
    for (upper, offset, n) in [
        (false, i64::MAX - 3, 12),
        (false, i64::MIN, 0),
        (true, i64::MIN + 1, 12),
        (true, i64::MAX - 3, 0),
    ] {
        assert_eq!(
            tri(upper)(3, 4, offset, None, cpu).unwrap().shape(),
            &[2, n]
        );
    }
    // Offsets whose sum with the rows leaves i64, where PyTorch's sizes
    // wrap (session 78): errors.
    for (upper, offset) in [(false, i64::MAX), (true, i64::MIN), (true, i64::MAX)] {
        assert!(tri(upper)(3, 4, offset, None, cpu).is_err());
    }
    // 2^125 indices: too many for a tensor.
    assert!(Tensor::tril_indices(i64::MAX, i64::MAX, 0, None, cpu).is_err());
    assert!(Tensor::triu_indices(i64::MAX, i64::MAX, i64::MIN, None, cpu).is_err());
    // A bin per value up to i64::MAX, or 2^50 of them: errors.
    assert!(ti64(&[i64::MAX]).bincount(None, 0).is_err());
    assert!(ti64(&[1 << 50]).bincount(None, 0).is_err());
    assert!(ti64(&[1]).bincount(None, i64::MAX).is_err());
    assert!(t64(&[1.0]).histc(i64::MAX, 0.0, 1.0).is_err());
    // Grids whose element count passes i64::MAX.
    let big = Tensor::zeros(&[1 << 16], DType::U8, cpu).unwrap();
    assert!(Tensor::meshgrid(&[&big, &big, &big, &big], "ij").is_err());
    assert!(Tensor::cartesian_prod(&[&big, &big, &big, &big]).is_err());
    // Orders past the dim's size leave it empty.
    let d = ti64(&[1, 2, 4]).diff(i64::MAX, 0, None, None).unwrap();
    assert_eq!(d.shape(), &[0]);
    // A sorter holding an index outside its row.
    let s = ti64(&[1, 2, 3]);
    let bad = ti64(&[0, 1, i64::MAX]);
    assert!(s.searchsorted(&s, false, false, None, Some(&bad)).is_err());
    let bad = ti64(&[0, i64::MIN, 2]);
    assert!(s.searchsorted(&s, false, false, None, Some(&bad)).is_err());
}
