//! `sort`, `argsort`, `msort`, `topk`, `kthvalue`, `median`/`nanmedian`
//! (session 60).
//!
//! - Against PyTorch 2.15's CPU answers in `tests/data/sort_s60.json.gz`
//!   (written by `benches/anchors/gen_sort_s60.py`, one thread): every
//!   dtype, views of every kind (transposed, permuted, expanded, stepped
//!   with an offset), ties, NaN, ±inf, signed zeros, empty and 0-d inputs;
//!   values bit for bit, shapes and strides, indices exactly where PyTorch
//!   specifies them and, where it does not (ties in topk/kthvalue/median,
//!   `stable = false` beyond 16 elements), pointing at equal elements and
//!   equal to those of PyTorch's own stable sort, which strata documents.
//! - A proptest against a simple reference (a stable sort of the row with
//!   an independent comparator) on random shapes, dims and layouts.
//! - Hostile inputs: typed errors and nothing changed.

use crate::pytorch_fixture::{dtype, gunzip, hexes, ints, same};
use proptest::prelude::*;
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor, TensorError};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(&gunzip(include_bytes!("../data/sort_s60.json.gz"))).unwrap()
});

/// A fixture tensor's data (hex f64 bits or integers) as a 1-d tensor of `dt`.
fn data(v: &Value, dt: DType) -> Tensor {
    if let Some(h) = v.get("hex") {
        let x = hexes(h.as_str().unwrap());
        Tensor::from_slice(&x, &[x.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
    } else {
        let x = ints(&v["ints"]);
        Tensor::from_slice(&x, &[x.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
    }
}

/// Elements as f64 (floats) or i64 (the others, exact), for comparison.
fn elems(t: &Tensor) -> Result<Vec<f64>, Vec<i64>> {
    if t.dtype().is_float() {
        Ok(t.to_vec_as::<f64>().unwrap())
    } else {
        Err(t.to_vec_as::<i64>().unwrap())
    }
}

fn equal_elems(a: &Tensor, b: &Tensor) -> bool {
    match (elems(a), elems(b)) {
        (Ok(x), Ok(y)) => same(&x, &y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

/// Equal as values (NaN equal to NaN, -0.0 to 0.0).
fn equal_values(a: &Tensor, b: &Tensor) -> bool {
    match (elems(a), elems(b)) {
        (Ok(x), Ok(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(&y)
                    .all(|(p, q)| p == q || (p.is_nan() && q.is_nan()))
        }
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

fn usizes(v: &Value) -> Vec<usize> {
    ints(v).into_iter().map(|x| x as usize).collect()
}

/// Runs a fixture case's op: (values, indices), either absent for the ops
/// that return one tensor.
fn run(op: &str, x: &Tensor, a: &Value) -> Result<(Option<Tensor>, Option<Tensor>), TensorError> {
    let dim = a.get("dim").map(|d| d.as_i64().unwrap()).unwrap_or(0);
    let flag = |k: &str| a[k].as_bool().unwrap();
    Ok(match op {
        "sort" => {
            let (v, i) = x.sort(dim, flag("descending"), flag("stable"))?;
            (Some(v), Some(i))
        }
        "argsort" => (
            None,
            Some(x.argsort(dim, flag("descending"), flag("stable"))?),
        ),
        "msort" => (Some(x.msort()?), None),
        "topk" => {
            let k = a["k"].as_u64().unwrap() as usize;
            let (v, i) = x.topk(k, dim, flag("largest"), flag("sorted"))?;
            (Some(v), Some(i))
        }
        "kthvalue" => {
            let k = a["k"].as_u64().unwrap() as usize;
            let (v, i) = x.kthvalue(k, dim, flag("keepdim"))?;
            (Some(v), Some(i))
        }
        "median_dim" => {
            let (v, i) = x.median_dim(dim, flag("keepdim"))?;
            (Some(v), Some(i))
        }
        "nanmedian_dim" => {
            let (v, i) = x.nanmedian_dim(dim, flag("keepdim"))?;
            (Some(v), Some(i))
        }
        "median" => (Some(x.median()?), None),
        "nanmedian" => (Some(x.nanmedian()?), None),
        _ => panic!("op {op}"),
    })
}

/// The elements of `x` at `indices` along the op's dim, shaped as the
/// values (`keepdim` false: the dim was removed).
fn gathered(op: &str, x: &Tensor, a: &Value, indices: &Tensor) -> Tensor {
    if x.ndim() == 0 {
        return x.clone();
    }
    let dim = a["dim"].as_i64().unwrap();
    let keep = a
        .get("keepdim")
        .map(|k| k.as_bool().unwrap())
        .unwrap_or(true);
    let idx = if keep || matches!(op, "sort" | "argsort" | "topk") {
        indices.clone()
    } else {
        indices.unsqueeze(dim).unwrap()
    };
    let g = x.gather(dim, &idx).unwrap();
    if idx.shape() == indices.shape() {
        g
    } else {
        g.squeeze_dims(&[dim]).unwrap()
    }
}

#[test]
fn sort_family_is_pytorchs() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 7000, "{}", cases.len());
    let mut bad = Vec::new();
    let mut unspecified = 0;
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let base = data(&c["base"], dt);
        let x = base
            .as_strided(
                &ints(&c["size"]),
                &ints(&c["stride"]),
                Some(c["offset"].as_i64().unwrap()),
            )
            .unwrap();
        let before = base.deep_clone().unwrap();
        let op = c["op"].as_str().unwrap();
        let what = format!(
            "{op} {} {} {} {:?} {}",
            c["dtype"],
            c["view"],
            c["kind"],
            x.shape(),
            c["args"]
        );
        let (v, i) = match run(op, &x, &c["args"]) {
            Ok(r) => r,
            Err(e) => {
                bad.push(format!("{what}: {e}"));
                continue;
            }
        };
        assert!(equal_elems(&base, &before), "{what}: the input changed");
        let exact = c["exact_indices"].as_bool().unwrap();
        if let Some(v) = &v {
            let want = data(&c["values"], dt);
            let got = v.contiguous().unwrap().reshape(&[-1]).unwrap();
            // Where PyTorch's choice among equal elements is unspecified,
            // its -0.0 may be strata's 0.0: equal values, not bits.
            let ok = if exact {
                equal_elems(&got, &want)
            } else {
                equal_values(&got, &want)
            };
            if v.dtype() != dt || v.shape() != usizes(&c["values_shape"]).as_slice() || !ok {
                bad.push(format!(
                    "{what}: values {:?} {:?}, want {:?}",
                    v.shape(),
                    elems(v),
                    elems(&want)
                ));
                continue;
            }
            if v.numel() > 0 && v.strides() != usizes(&c["values_stride"]).as_slice() {
                bad.push(format!(
                    "{what}: values strides {:?}, want {}",
                    v.strides(),
                    c["values_stride"]
                ));
            }
        }
        if let Some(i) = &i {
            assert_eq!(i.dtype(), DType::I64, "{what}");
            let got = i.to_vec::<i64>().unwrap();
            if i.shape() != usizes(&c["indices_shape"]).as_slice() {
                bad.push(format!("{what}: indices shape {:?}", i.shape()));
                continue;
            }
            if i.numel() > 0 && i.strides() != usizes(&c["indices_stride"]).as_slice() {
                bad.push(format!("{what}: indices strides {:?}", i.strides()));
            }
            if c["exact_indices"].as_bool().unwrap() {
                if got != ints(&c["indices"]) {
                    bad.push(format!("{what}: indices {got:?}, want {}", c["indices"]));
                }
            } else {
                unspecified += 1;
                // Strata's documented choice: a stable sort's.
                if got != ints(&c["stable_indices"]) {
                    bad.push(format!(
                        "{what}: indices {got:?}, want the stable {}",
                        c["stable_indices"]
                    ));
                }
                // And strata's values are the elements at them, bit for bit.
                if let Some(v) = &v {
                    if !equal_elems(&gathered(op, &x, &c["args"], i), v) {
                        bad.push(format!("{what}: indices {got:?} point at other values"));
                    }
                }
            }
        }
    }
    assert!(unspecified > 1000, "{unspecified}");
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(20)].join("\n")
    );
}

/// PyTorch's documented order on f64 (NaN greatest, -0.0 == 0.0),
/// written independently of strata's keys.
fn total(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// The rows of `x` (row-major, as f64) along `dim`: (positions in the
/// row-major element list of each row's elements), per row.
fn rows_along(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    let outer: usize = shape[..dim].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            out.push((0..n).map(|j| (o * n + j) * inner + i).collect());
        }
    }
    out
}

/// A stable sort of a row's values (positions 0..n), by `total`.
fn stable_order(vals: &[f64], descending: bool) -> Vec<usize> {
    let mut p: Vec<usize> = (0..vals.len()).collect();
    p.sort_by(|&a, &b| {
        let o = total(vals[a], vals[b]);
        if descending {
            o.reverse()
        } else {
            o
        }
    });
    p
}

fn layout_view(t: &Tensor, layout: u8) -> Tensor {
    match layout {
        // The transpose of a contiguous copy of the transpose: same values,
        // transposed strides.
        1 if t.ndim() >= 2 => t
            .transpose(0, -1)
            .unwrap()
            .contiguous()
            .unwrap()
            .transpose(0, -1)
            .unwrap(),
        // A stepped view (gaps, an offset 1) holding the same values.
        2 => Tensor::stack(&[t, t], -1).unwrap().select(-1, 1).unwrap(),
        _ => t.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn sort_family_matches_a_reference(
        shape in proptest::collection::vec(1usize..7, 1..4),
        dim_pick in 0usize..3,
        seed in 0u64..1_000_000,
        dt_pick in 0usize..7,
        layout in 0u8..3,
        descending in any::<bool>(),
        kfrac in 0.0f64..1.0,
    ) {
        let dtypes = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8];
        let dt = dtypes[dt_pick];
        let dim = dim_pick % shape.len();
        let numel: usize = shape.iter().product();
        // Few distinct values (many ties), NaN and signed zeros in floats.
        let mut s = seed;
        let vals: Vec<f64> = (0..numel).map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = (s >> 33) % 9;
            if dt.is_float() {
                match r { 0 => f64::NAN, 1 => -0.0, 2 => 0.0, 3 => f64::NEG_INFINITY, r => r as f64 - 6.0 }
            } else {
                r as f64
            }
        }).collect();
        let t = Tensor::from_slice(&vals, &shape, Device::Cpu).unwrap().to_dtype(dt).unwrap();
        let x = layout_view(&t, layout);
        prop_assert!(equal_elems(&x.contiguous().unwrap(), &t));
        let host = t.to_vec_as::<f64>().unwrap();
        let n = shape[dim];
        let rows = rows_along(&shape, dim);
        let (v, i) = x.sort(dim as i64, descending, false).unwrap();
        let (vv, ii) = (v.contiguous().unwrap().to_vec_as::<f64>().unwrap(), i.contiguous().unwrap().to_vec::<i64>().unwrap());
        let k = ((n as f64) * kfrac) as usize;
        let (tv, ti) = x.topk(k, dim as i64, descending, true).unwrap();
        let (tv, ti) = (tv.to_vec_as::<f64>().unwrap(), ti.to_vec::<i64>().unwrap());
        let (kv, ki) = x.kthvalue(k.max(1), dim as i64, false).unwrap();
        let (kv, ki) = (kv.to_vec_as::<f64>().unwrap(), ki.to_vec::<i64>().unwrap());
        let (mv, mi) = x.median_dim(dim as i64, false).unwrap();
        let (mv, mi) = (mv.to_vec_as::<f64>().unwrap(), mi.to_vec::<i64>().unwrap());
        let (nv, ni) = x.nanmedian_dim(dim as i64, true).unwrap();
        let (nv, ni) = (nv.to_vec_as::<f64>().unwrap(), ni.to_vec::<i64>().unwrap());
        let kshape_rows: Vec<Vec<usize>> = {
            let mut ks = shape.clone();
            ks[dim] = k;
            if k > 0 { rows_along(&ks, dim) } else { vec![vec![]; rows.len()] }
        };
        for (r, pos) in rows.iter().enumerate() {
            let row: Vec<f64> = pos.iter().map(|&p| host[p]).collect();
            let order = stable_order(&row, descending);
            for (j, &p) in pos.iter().enumerate() {
                prop_assert_eq!(ii[p], order[j] as i64);
                prop_assert!(same(&[vv[p]], &[row[order[j]]]));
            }
            for (j, &p) in kshape_rows[r].iter().enumerate() {
                prop_assert_eq!(ti[p], order[j] as i64);
                prop_assert!(same(&[tv[p]], &[row[order[j]]]));
            }
            let asc = stable_order(&row, false);
            prop_assert_eq!(ki[r], asc[k.max(1) - 1] as i64);
            prop_assert!(same(&[kv[r]], &[row[asc[k.max(1) - 1]]]));
            let nans = row.iter().filter(|v| v.is_nan()).count();
            let m = n - nans;
            let med = if nans > 0 { asc[m] } else { asc[(n - 1) / 2] };
            prop_assert_eq!(mi[r], med as i64);
            prop_assert!(same(&[mv[r]], &[row[med]]));
            let nmed = if m == 0 { asc[0] } else { asc[(m - 1) / 2] };
            prop_assert_eq!(ni[r], nmed as i64);
            prop_assert!(same(&[nv[r]], &[row[nmed]]));
        }
        // median of every element: the flattened row.
        let all = x.median().unwrap().to_vec_as::<f64>().unwrap()[0];
        let asc = stable_order(&host, false);
        let nans = host.iter().filter(|v| v.is_nan()).count();
        let want = if nans > 0 { f64::NAN } else { host[asc[(numel - 1) / 2]] };
        prop_assert!(same(&[all], &[want]), "{} {}", all, want);
    }
}

/// Long rows (the parallel sort and the selection paths) and many rows,
/// against the reference.
#[test]
fn long_and_many_rows_match_the_reference() {
    let mut s = 7u64;
    let mut draw = |m: u64| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) % m
    };
    // One row of 300k with ties, and NaNs.
    let n = 300_000;
    let vals: Vec<f32> = (0..n)
        .map(|_| match draw(1000) {
            0 => f32::NAN,
            r => (r % 97) as f32 - 48.0,
        })
        .collect();
    let x = Tensor::from_slice(&vals, &[n], Device::Cpu).unwrap();
    let row: Vec<f64> = vals.iter().map(|&v| f64::from(v)).collect();
    for desc in [false, true] {
        let order = stable_order(&row, desc);
        let (v, i) = x.sort(0, desc, false).unwrap();
        let i = i.to_vec::<i64>().unwrap();
        let v = v.to_vec_as::<f64>().unwrap();
        assert!(i.iter().zip(&order).all(|(&a, &b)| a == b as i64));
        assert!(same(&v, &order.iter().map(|&p| row[p]).collect::<Vec<_>>()));
        for k in [1usize, 5, 1000, 150_000] {
            let (tv, ti) = x.topk(k, 0, desc, true).unwrap();
            assert_eq!(ti.to_vec::<i64>().unwrap(), i[..k].to_vec(), "k {k}");
            assert!(same(&tv.to_vec_as::<f64>().unwrap(), &v[..k]));
        }
    }
    let asc = stable_order(&row, false);
    for k in [1usize, 2, 77_777, n] {
        let (kv, ki) = x.kthvalue(k, 0, false).unwrap();
        assert_eq!(ki.to_vec::<i64>().unwrap(), vec![asc[k - 1] as i64]);
        assert!(same(&kv.to_vec_as::<f64>().unwrap(), &[row[asc[k - 1]]]));
    }
    let nans = row.iter().filter(|v| v.is_nan()).count();
    let (nv, ni) = x.nanmedian_dim(0, false).unwrap();
    assert_eq!(
        ni.to_vec::<i64>().unwrap(),
        vec![asc[(n - nans - 1) / 2] as i64]
    );
    assert_eq!(
        nv.to_vec::<f32>().unwrap(),
        vec![vals[asc[(n - nans - 1) / 2]]]
    );
    let (_, mi) = x.median_dim(0, false).unwrap();
    let first_nan = vals.iter().position(|v| v.is_nan()).unwrap();
    assert_eq!(mi.to_vec::<i64>().unwrap(), vec![first_nan as i64]);

    // 70k rows of 5 i64 (a transposed view), sorted along dim 0.
    let rows = 70_000;
    let data: Vec<i64> = (0..rows * 5).map(|_| draw(7) as i64 - 3).collect();
    let t = Tensor::from_slice(&data, &[rows, 5], Device::Cpu).unwrap();
    let x = t.t().unwrap();
    let (v, i) = x.sort(0, true, true).unwrap();
    assert_eq!(
        v.strides(),
        x.strides(),
        "a transposed input keeps its strides"
    );
    let i = i
        .t()
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    let v = v
        .t()
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    for r in 0..rows {
        let row: Vec<f64> = data[r * 5..r * 5 + 5].iter().map(|&v| v as f64).collect();
        let order = stable_order(&row, true);
        for j in 0..5 {
            assert_eq!(i[r * 5 + j], order[j] as i64);
            assert_eq!(v[r * 5 + j], data[r * 5 + order[j]]);
        }
    }
}

#[test]
fn bool_and_extreme_integers_sort_in_order() {
    let b = Tensor::from_slice(&[true, false, true, false, false], &[5], Device::Cpu).unwrap();
    let (v, i) = b.sort(0, true, false).unwrap();
    assert_eq!(
        v.to_vec::<bool>().unwrap(),
        vec![true, true, false, false, false]
    );
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 2, 1, 3, 4]);
    let x = Tensor::from_slice(&[i64::MAX, i64::MIN, 0, -1, i64::MAX], &[5], Device::Cpu).unwrap();
    let (v, i) = x.sort(0, false, true).unwrap();
    assert_eq!(
        v.to_vec::<i64>().unwrap(),
        vec![i64::MIN, -1, 0, i64::MAX, i64::MAX]
    );
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 3, 2, 0, 4]);
    let y = Tensor::from_slice(&[i32::MAX, i32::MIN, 7], &[3], Device::Cpu).unwrap();
    assert_eq!(
        y.argsort(0, true, true).unwrap().to_vec::<i64>().unwrap(),
        vec![0, 2, 1]
    );
    // i32::MAX is not mistaken for a NaN by median.
    assert_eq!(y.median().unwrap().to_vec::<i32>().unwrap(), vec![7]);
    let z = Tensor::from_slice(&[i32::MAX, i32::MAX, 1], &[3], Device::Cpu).unwrap();
    assert_eq!(
        z.median_dim(0, false).unwrap().1.to_vec::<i64>().unwrap(),
        vec![0]
    );
}

#[test]
fn hostile_arguments_are_typed_errors_and_change_nothing() {
    let x = Tensor::from_slice(&[3.0f32, 1.0, 2.0, 0.5, 4.0, 1.0], &[2, 3], Device::Cpu).unwrap();
    let before = x.deep_clone().unwrap();
    let dim = |r: Result<(Tensor, Tensor), TensorError>| matches!(r, Err(TensorError::Dim { .. }));
    assert!(dim(x.sort(2, false, false)));
    assert!(dim(x.sort(-3, false, false)));
    assert!(dim(x.sort(i64::MIN, false, false)));
    assert!(dim(x.topk(1, 2, true, true)));
    assert!(dim(x.kthvalue(1, 5, false)));
    assert!(dim(x.median_dim(-3, false)));
    assert!(dim(x.nanmedian_dim(i64::MAX, false)));
    assert!(x.argsort(9, false, false).is_err());
    let index =
        |r: Result<(Tensor, Tensor), TensorError>| matches!(r, Err(TensorError::Index { .. }));
    assert!(index(x.topk(4, 1, true, true)));
    assert!(index(x.topk(usize::MAX, 1, true, true)));
    assert!(index(x.kthvalue(0, 1, false)));
    assert!(index(x.kthvalue(4, 1, false)));
    assert!(index(x.kthvalue(usize::MAX, 0, false)));
    // 0-d: k in {0, 1} for topk, 1 for kthvalue.
    let s = Tensor::scalar(2.5f32, DType::F32, Device::Cpu).unwrap();
    assert!(index(s.topk(2, 0, true, true)));
    assert!(index(s.kthvalue(2, 0, false)));
    assert!(dim(s.sort(1, false, false)));
    let (v, i) = s.topk(0, -1, true, true).unwrap();
    assert_eq!(
        (
            v.shape(),
            v.to_vec::<f32>().unwrap(),
            i.to_vec::<i64>().unwrap()
        ),
        (&[][..], vec![2.5], vec![0])
    );
    // Bool: sorts, but topk/kthvalue/median refuse it (as PyTorch's CPU).
    let b = Tensor::from_slice(&[true, false], &[2], Device::Cpu).unwrap();
    let dtype =
        |r: Result<(Tensor, Tensor), TensorError>| matches!(r, Err(TensorError::DType { .. }));
    assert!(dtype(b.topk(1, 0, true, true)));
    assert!(dtype(b.kthvalue(1, 0, false)));
    assert!(dtype(b.median_dim(0, false)));
    assert!(dtype(b.nanmedian_dim(0, false)));
    assert!(matches!(b.median(), Err(TensorError::DType { .. })));
    assert!(matches!(b.nanmedian(), Err(TensorError::DType { .. })));
    // A reduced dim of size 0.
    let e = Tensor::zeros(&[2, 0], DType::F32, Device::Cpu).unwrap();
    let empty =
        |r: Result<(Tensor, Tensor), TensorError>| matches!(r, Err(TensorError::Empty { .. }));
    assert!(empty(e.kthvalue(1, 1, false)));
    assert!(empty(e.median_dim(1, true)));
    assert!(empty(e.nanmedian_dim(-1, false)));
    assert!(index(e.topk(1, 1, true, true)));
    assert_eq!(e.topk(0, 1, true, true).unwrap().0.shape(), &[2, 0]);
    assert_eq!(e.median_dim(0, false).unwrap().0.shape(), &[0]);
    // Huge: an expanded 2^40-element row cannot be sorted in memory.
    let one = Tensor::from_slice(&[1.0f32], &[1], Device::Cpu).unwrap();
    let huge = one.expand(&[1 << 40]).unwrap();
    assert!(huge.sort(0, false, false).is_err());
    assert!(huge.topk(3, 0, true, true).is_err());
    assert!(huge.median().is_err());
    assert!(equal_elems(&x, &before), "the input changed");
    assert_eq!(one.to_vec::<f32>().unwrap(), vec![1.0]);
}
