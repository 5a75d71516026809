//! Session 60's contractions, diagonals, scaled products, `lerp` and
//! `cross` against PyTorch 2.15 (CPU, one thread): `tests/data/contract_s60.json.gz`,
//! written by `benches/anchors/gen_contract_s60.py` (operands in four
//! layouts: contiguous, transposed, step-sliced, broadcast with stride 0).
//! Exact ops (views, `diag*`, `outer`, `kron`, `lerp`, `cross`, integer
//! results) are compared bit for bit; float contractions within a tolerance
//! scaled by the same op on the operands' absolute values (PyTorch's order
//! of additions is its BLAS's). Then property tests against simple
//! references (a naive einsum over every label assignment, in f64) on random
//! equations, shapes and layouts, and hostile inputs (typed errors, operands
//! unchanged).

use crate::pytorch_fixture::{dtype, fixture, gunzip, host, num, same, shape};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/contract_s60.json.gz"))));

/// A fixture operand: its values laid out as the generator laid them out.
fn operand(spec: &Value) -> Tensor {
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let shp = shape(&spec["shape"]);
    let vals: Vec<f64> = spec["values"].as_array().unwrap().iter().map(num).collect();
    let c = Tensor::from_slice(&vals, &shp, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    lay_out(&c, spec["layout"].as_str().unwrap())
}

/// `c` (contiguous) with the same values in layout `lay`.
fn lay_out(c: &Tensor, lay: &str) -> Tensor {
    let nd = c.ndim();
    match lay {
        "t" if nd >= 2 => {
            let t = c.transpose(-1, -2).unwrap().clone_contiguous().unwrap();
            t.transpose(-1, -2).unwrap()
        }
        "s" if nd >= 1 => {
            let mut wide: Vec<usize> = c.shape().to_vec();
            wide[nd - 1] *= 2;
            let base = Tensor::zeros(&wide, c.dtype(), Device::Cpu).unwrap();
            let v = base.slice(-1, None, None, 2).unwrap();
            v.copy_(c).unwrap();
            v
        }
        "e" if nd >= 2 && c.shape()[0] > 0 => {
            let row = c.narrow(0, 0, 1).unwrap().clone_contiguous().unwrap();
            let target: Vec<i64> = c.shape().iter().map(|&s| s as i64).collect();
            row.expand(&target).unwrap()
        }
        _ => c.clone(),
    }
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        v => Scalar::Float(num(v)),
    }
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// strata's answer to a fixture case.
fn run(op: &str, t: &[Tensor], args: &Value) -> Result<Tensor, TensorError> {
    let i = |k: &str| args[k].as_i64().unwrap();
    match op {
        "einsum" => {
            let refs: Vec<&Tensor> = t.iter().collect();
            Tensor::einsum(args["eq"].as_str().unwrap(), &refs)
        }
        "tensordot" => match &args["dims"] {
            Value::Number(n) => t[0].tensordot(&t[1], n.as_i64().unwrap()),
            v => {
                let (a, b) = (ints(&v[0]), ints(&v[1]));
                t[0].tensordot(&t[1], (&a[..], &b[..]))
            }
        },
        "inner" => t[0].inner(&t[1]),
        "outer" => t[0].outer(&t[1]),
        "kron" => t[0].kron(&t[1]),
        "diagonal" => t[0].diagonal(i("offset"), i("dim1"), i("dim2")),
        "diag" => t[0].diag(i("offset")),
        "diag_embed" => t[0].diag_embed(i("offset"), i("dim1"), i("dim2")),
        "trace" => t[0].trace(),
        "baddbmm" | "addbmm" | "addmv" | "addr" => {
            let (beta, alpha) = (scalar(&args["beta"]), scalar(&args["alpha"]));
            match op {
                "baddbmm" => t[0].baddbmm(&t[1], &t[2], beta, alpha),
                "addbmm" => t[0].addbmm(&t[1], &t[2], beta, alpha),
                "addmv" => t[0].addmv(&t[1], &t[2], beta, alpha),
                _ => t[0].addr(&t[1], &t[2], beta, alpha),
            }
        }
        "lerp" => match t.get(2) {
            Some(w) => t[0].lerp(&t[1], w),
            None => t[0].lerp(&t[1], scalar(&args["weight"])),
        },
        "cross" => t[0].cross(&t[1], i("dim")),
        _ => panic!("op {op}"),
    }
}

/// Whether an op's float values depend on an order of additions that
/// strata does not follow (compared within a tolerance).
fn order_dependent(op: &str) -> bool {
    matches!(
        op,
        "einsum" | "tensordot" | "inner" | "trace" | "baddbmm" | "addbmm" | "addmv" | "addr"
    )
}

/// The relative tolerance of a float result of `dt` (a few roundings of
/// the result and of f32 sums of up to ~60 terms).
fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F64 => 1e-12,
        DType::F32 => 2e-5,
        DType::F16 => 4.0 * 2f64.powi(-11) + 2e-5,
        DType::BF16 => 4.0 * 2f64.powi(-8) + 2e-5,
        _ => 0.0,
    }
}

fn check_case(c: &Value) -> Option<String> {
    let name = c["name"].as_str().unwrap();
    let op = c["op"].as_str().unwrap();
    let inputs: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(operand)
        .collect();
    let before: Vec<Vec<f64>> = inputs.iter().map(host).collect();
    let got = run(op, &inputs, &c["args"]);
    // No op here writes to its operands, failed or not.
    for (k, (t, b)) in inputs.iter().zip(&before).enumerate() {
        if !same(&host(t), b) {
            return Some(format!("{name}: operand {k} changed"));
        }
    }
    if let Some(e) = c.get("error") {
        return match got {
            Err(_) => None,
            Ok(r) => Some(format!(
                "{name}: PyTorch raised {e}, strata gave {:?}",
                r.shape()
            )),
        };
    }
    let r = match got {
        Ok(r) => r,
        Err(e) => return Some(format!("{name}: strata failed: {e}")),
    };
    let ex = &c["expect"];
    let (edt, eshape) = (dtype(ex["dtype"].as_str().unwrap()), shape(&ex["shape"]));
    if r.dtype() != edt || r.shape() != eshape {
        return Some(format!(
            "{name}: {} {:?}, PyTorch {edt} {eshape:?}",
            r.dtype(),
            r.shape()
        ));
    }
    let want: Vec<f64> = ex["values"].as_array().unwrap().iter().map(num).collect();
    let have = host(&r);
    if !edt.is_float() || !order_dependent(op) {
        if !same(&have, &want) {
            let k = (0..want.len())
                .find(|&k| {
                    have[k].to_bits() != want[k].to_bits()
                        && !(have[k].is_nan() && want[k].is_nan())
                })
                .unwrap();
            return Some(format!(
                "{name}: element {k}: {} vs PyTorch {}",
                have[k], want[k]
            ));
        }
        return None;
    }
    // Cases without a scale (mixed dtypes): the result's own magnitude.
    let scale: Vec<f64> = match c.get("scale") {
        Some(s) => s.as_array().unwrap().iter().map(num).collect(),
        None => want.iter().map(|w| w.abs().max(1.0)).collect(),
    };
    let tol = tolerance(edt);
    for k in 0..want.len() {
        let (h, w) = (have[k], want[k]);
        let ok = if w.is_nan() || scale[k].is_nan() || scale[k].is_infinite() {
            // NaN or inf among the terms: NaN or the same infinity.
            (h.is_nan() && w.is_nan()) || h == w
        } else {
            (h - w).abs() <= tol * scale[k] + 1e-30
        };
        if !ok {
            return Some(format!(
                "{name}: element {k}: {h} vs PyTorch {w} (scale {})",
                scale[k]
            ));
        }
    }
    None
}

#[test]
fn every_case_as_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() >= 700, "{} cases", cases.len());
    let bad: Vec<String> = cases.iter().filter_map(check_case).collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

#[test]
fn views_share_storage_as_in_pytorch() {
    let a = Tensor::arange(0.0, 24.0, 1.0, Some(DType::F32), Device::Cpu)
        .unwrap()
        .view(&[2, 3, 4])
        .unwrap();
    // torch.diagonal(a, 1, -1, 1): shape [2, 2], strides [12, 5], offset 4.
    let d = a.diagonal(1, -1, 1).unwrap();
    assert!(d.same_storage(&a));
    assert_eq!(
        (d.shape(), d.strides(), d.offset()),
        (&[2usize, 2][..], &[12usize, 5][..], 4)
    );
    // Past the edge: empty, storage offset unchanged (PyTorch: 0).
    let e = a.diagonal(9, 1, 2).unwrap();
    assert_eq!((e.shape(), e.offset()), (&[2usize, 0][..], 0));
    // A write through the view lands in the base.
    d.fill_(-1.0).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap()[4], -1.0);
    assert_eq!(a.to_vec::<f32>().unwrap()[9], -1.0);
    // einsum of one operand with nothing summed is a view (PyTorch's too).
    let t = Tensor::einsum("ijk->kji", &[&a]).unwrap();
    assert!(t.same_storage(&a) && !t.is_contiguous());
    let dd = Tensor::einsum(
        "ii->i",
        &[&Tensor::ones(&[3, 3], DType::F32, Device::Cpu).unwrap()],
    )
    .unwrap();
    assert_eq!(dd.strides(), &[4]);
    // diag of a matrix copies (row-major), as PyTorch's.
    let m = a.narrow(0, 0, 1).unwrap().squeeze_dims(&[0]).unwrap();
    let dg = m.diag(0).unwrap();
    assert!(!dg.same_storage(&a) && dg.is_contiguous());
}

#[test]
fn beta_zero_ignores_nan_and_inf_in_self() {
    let nan = Tensor::full(&[2, 2], f64::NAN, DType::F32, Device::Cpu).unwrap();
    let inf = Tensor::full(&[2], f64::INFINITY, DType::F32, Device::Cpu).unwrap();
    let ones = |s: &[usize]| Tensor::ones(s, DType::F32, Device::Cpu).unwrap();
    let r = nan
        .baddbmm(&ones(&[3, 2, 4]), &ones(&[3, 4, 2]), 0, 1)
        .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![4.0; 12]);
    let r = nan
        .addbmm(&ones(&[3, 2, 4]), &ones(&[3, 4, 2]), 0.0, 0.5)
        .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.0; 4]);
    let r = inf.addmv(&ones(&[2, 3]), &ones(&[3]), 0, 2).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.0; 2]);
    let r = nan.addr(&ones(&[2]), &ones(&[2]), 0, 1).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0; 4]);
    // beta != 0 propagates NaN (0 * NaN is NaN in PyTorch too).
    let r = nan.addr(&ones(&[2]), &ones(&[2]), 1e-30, 1).unwrap();
    assert!(r.to_vec::<f32>().unwrap().iter().all(|x| x.is_nan()));
}

// ---------------------------------------------------------------------------
// Property tests against simple references.

/// A naive einsum in f64 over every assignment of the labels: operands
/// given by their labels (no ellipsis), values, shapes.
fn naive_einsum(
    labels: &[Vec<u8>],
    ops: &[(Vec<f64>, Vec<usize>)],
    out: &[u8],
) -> (Vec<f64>, Vec<usize>) {
    let mut size = std::collections::BTreeMap::new();
    for (l, (_, s)) in labels.iter().zip(ops) {
        for (c, &n) in l.iter().zip(s) {
            // Size-1 dims broadcast.
            let e = size.entry(*c).or_insert(n);
            if *e == 1 {
                *e = n;
            }
        }
    }
    let all: Vec<u8> = size.keys().copied().collect();
    let out_shape: Vec<usize> = out.iter().map(|c| size[c]).collect();
    let n_out: usize = out_shape.iter().product();
    let mut res = vec![0.0; n_out];
    let total: usize = all.iter().map(|c| size[c]).product();
    let mut idx = vec![0usize; all.len()];
    for _ in 0..total {
        let val = |c: u8| idx[all.iter().position(|&x| x == c).unwrap()];
        let mut p = 1.0;
        for (l, (v, s)) in labels.iter().zip(ops) {
            let mut off = 0;
            for (c, &n) in l.iter().zip(s) {
                off = off * n + if n == 1 { 0 } else { val(*c) };
            }
            p *= v[off];
        }
        let mut o = 0;
        for (c, &n) in out.iter().zip(&out_shape) {
            o = o * n + val(*c);
        }
        res[o] += p;
        // next assignment
        for d in (0..all.len()).rev() {
            idx[d] += 1;
            if idx[d] < size[&all[d]] {
                break;
            }
            idx[d] = 0;
        }
    }
    (res, out_shape)
}

/// Random equations: up to 3 operands of up to 3 labels from `abcd`
/// (repeats within an operand allowed, taking diagonals), an explicit or
/// implicit output.
/// A random equation: the operands' labels, the explicit output (if any),
/// the sizes of the labels `abcd`, a seed.
type Equation = (Vec<Vec<u8>>, Option<Vec<u8>>, [usize; 4], u64);

fn equation_strategy() -> impl Strategy<Value = Equation> {
    (
        prop::collection::vec(prop::collection::vec(0u8..4, 0..4), 1..4),
        prop::option::of(prop::collection::vec(0u8..4, 0..4)),
        [1usize..4, 1usize..4, 0usize..4, 1usize..4],
        any::<u64>(),
    )
        .prop_map(|(ops, out, sizes, seed)| {
            let ops: Vec<Vec<u8>> = ops
                .into_iter()
                .map(|o| o.into_iter().map(|c| b'a' + c).collect())
                .collect();
            let used: std::collections::BTreeSet<u8> = ops.iter().flatten().copied().collect();
            let out = out.map(|o| {
                let mut seen = Vec::new();
                for c in o {
                    let c = b'a' + c;
                    if used.contains(&c) && !seen.contains(&c) {
                        seen.push(c);
                    }
                }
                seen
            });
            (ops, out, sizes, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn einsum_matches_a_naive_sum((labels, out, sizes, seed) in equation_strategy(),
                                  transpose in any::<bool>(), f64_or_f32 in any::<bool>()) {
        let dt = if f64_or_f32 { DType::F64 } else { DType::F32 };
        let mut tensors = Vec::new();
        let mut data = Vec::new();
        for (k, l) in labels.iter().enumerate() {
            let shp: Vec<usize> = l.iter().map(|c| sizes[(c - b'a') as usize]).collect();
            let t = Tensor::randn(&shp, DType::F64, seed.wrapping_add(k as u64), Device::Cpu).unwrap().to_dtype(dt).unwrap();
            data.push((host(&t), shp.clone()));
            tensors.push(if transpose { lay_out(&t, "t") } else { t });
        }
        let implicit: Vec<u8> = {
            let mut counts = [0usize; 4];
            for c in labels.iter().flatten() { counts[(c - b'a') as usize] += 1; }
            (0..4u8).filter(|&c| counts[c as usize] == 1).map(|c| b'a' + c).collect()
        };
        let lhs: Vec<String> = labels.iter().map(|l| String::from_utf8(l.clone()).unwrap()).collect();
        let eq = match &out {
            Some(o) => format!("{}->{}", lhs.join(","), String::from_utf8(o.clone()).unwrap()),
            None => lhs.join(","),
        };
        let out_labels = out.clone().unwrap_or(implicit);
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let got = Tensor::einsum(&eq, &refs).unwrap();
        let abs: Vec<(Vec<f64>, Vec<usize>)> = data.iter().map(|(v, s)| (v.iter().map(|x| x.abs()).collect(), s.clone())).collect();
        let (want, wshape) = naive_einsum(&labels, &data, &out_labels);
        let (scale, _) = naive_einsum(&labels, &abs, &out_labels);
        prop_assert_eq!(got.shape(), &wshape[..], "{}", eq);
        let have = host(&got);
        let tol = if dt == DType::F64 { 1e-12 } else { 1e-5 };
        for k in 0..want.len() {
            prop_assert!((have[k] - want[k]).abs() <= tol * scale[k] + 1e-300, "{}: {} vs {}", eq, have[k], want[k]);
        }
    }

    #[test]
    fn diagonal_reads_the_right_elements(r in 0usize..5, c in 0usize..5, b in 1usize..3, offset in -6i64..6,
                                         swap in any::<bool>(), transpose in any::<bool>()) {
        let base = Tensor::arange(0.0, (b * r * c) as f64, 1.0, Some(DType::F64), Device::Cpu).unwrap()
            .view(&[b as i64, r as i64, c as i64]).unwrap();
        let t = if transpose { lay_out(&base, "t") } else { base.clone() };
        let vals = host(&base);
        let (d1, d2) = if swap { (2, 1) } else { (1, 2) };
        let d = t.diagonal(offset, d1, d2).unwrap();
        prop_assert!(d.same_storage(&t));
        // Reference: element (i, i + offset) in the (d1, d2) plane.
        let (n1, n2) = if swap { (c, r) } else { (r, c) };
        let mut want = Vec::new();
        for bb in 0..b {
            for i in 0..n1 as i64 {
                let j = i + offset;
                if j < 0 || j >= n2 as i64 { continue; }
                let (row, col) = if swap { (j as usize, i as usize) } else { (i as usize, j as usize) };
                want.push(vals[(bb * r + row) * c + col]);
            }
        }
        prop_assert_eq!(host(&d), want);
    }

    #[test]
    fn lerp_and_cross_follow_the_fused_formulas(n in 1usize..40, seed in any::<u64>(), w in -2.0f32..3.0) {
        let a = Tensor::randn(&[n, 3], DType::F32, seed, Device::Cpu).unwrap();
        let b = Tensor::randn(&[n, 3], DType::F32, seed ^ 7, Device::Cpu).unwrap();
        let (va, vb) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let l = a.lerp(&b, w as f64).unwrap().to_vec::<f32>().unwrap();
        for k in 0..va.len() {
            let d = vb[k] - va[k];
            let want = if w.abs() < 0.5 { w.mul_add(d, va[k]) } else { (w - 1.0).mul_add(d, vb[k]) };
            prop_assert_eq!(l[k].to_bits(), want.to_bits());
        }
        let x = a.cross(&b, -1).unwrap().to_vec::<f32>().unwrap();
        for r in 0..n {
            let (p, q) = (&va[3 * r..3 * r + 3], &vb[3 * r..3 * r + 3]);
            let f = |i: usize, j: usize| p[i].mul_add(q[j], -(p[j] * q[i]));
            prop_assert_eq!(&x[3 * r..3 * r + 3], &[f(1, 2), f(2, 0), f(0, 1)][..]);
        }
    }
}

// ---------------------------------------------------------------------------
// Hostile inputs: typed errors, nothing changed.

#[test]
fn hostile_arguments_are_typed_errors() {
    let cpu = Device::Cpu;
    let a = Tensor::randn(&[2, 3], DType::F32, 1, cpu).unwrap();
    let before = host(&a);
    let is = |r: Result<Tensor, TensorError>, what: &str| -> TensorError {
        match r {
            Err(e) => e,
            Ok(t) => panic!("{what}: expected an error, got {:?}", t.shape()),
        }
    };
    // diagonal: extreme offsets are empty views, never a wrapped offset.
    for off in [i64::MIN, i64::MIN + 1, i64::MAX] {
        let d = a.diagonal(off, 0, 1).unwrap();
        assert_eq!(d.shape(), &[0]);
    }
    assert!(matches!(
        is(a.diagonal(0, 0, -2), "same dim"),
        TensorError::Dim { .. }
    ));
    assert!(matches!(
        is(a.diagonal(0, 0, i64::MIN), "dim"),
        TensorError::Dim { .. }
    ));
    // diag_embed / diag: a side that overflows.
    assert!(matches!(
        is(a.diag_embed(i64::MAX, 0, 1), "side"),
        TensorError::SizeOverflow { .. }
    ));
    assert!(matches!(
        is(a.diag_embed(i64::MIN, 0, 1), "side"),
        TensorError::SizeOverflow { .. }
    ));
    let v = Tensor::ones(&[3], DType::F32, cpu).unwrap();
    assert!(is(v.diag(1 << 40), "huge diag").to_string().len() > 10);
    // kron of sizes whose product overflows (broadcast views hold no memory).
    let big = Tensor::ones(&[1], DType::F32, cpu)
        .unwrap()
        .expand(&[1 << 40])
        .unwrap();
    assert!(matches!(
        is(big.kron(&big), "kron"),
        TensorError::SizeOverflow { .. }
    ));
    // einsum: bad equations.
    for eq in [
        "",
        "ij,",
        "i->j",
        "i$",
        "i->i->i",
        "....",
        "i...,...->.",
        "Ii->",
    ] {
        let _ = is(Tensor::einsum(eq, &[&v]), eq);
    }
    assert!(matches!(
        is(Tensor::einsum("i", &[]), "no operand"),
        TensorError::Value { .. }
    ));
    // tensordot: counts.
    assert!(is(a.tensordot(&a, i64::MAX), "count")
        .to_string()
        .contains("dims"));
    assert!(is(a.tensordot(&a, -1), "count")
        .to_string()
        .contains("dims"));
    // scaled products: values that do not fit the dtype, wrong ranks.
    let i = Tensor::ones(&[2, 2], DType::I32, cpu).unwrap();
    let iv = Tensor::ones(&[2], DType::I32, cpu).unwrap();
    let _ = is(i.addmv(&i, &iv, 1i64 << 40, 1), "beta overflow");
    let _ = is(i.addr(&iv, &iv, 1, 0.5), "float alpha");
    let _ = is(a.addmv(&a, &a, 1, 1), "vec rank");
    let _ = is(a.lerp(&a, f64::MAX), "weight overflow");
    let _ = is(a.lerp(&a.to_dtype(DType::F64).unwrap(), 0.5), "end dtype");
    // Nothing changed.
    assert!(same(&host(&a), &before));
}

#[test]
fn lerp_signs_of_zero_inf_and_nan_as_pytorch() {
    let f = |v: &[f32]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    // lerp(-0, -0, 0.25) = fma(0.25, -0 - -0, -0) = +0 (PyTorch: +0.0).
    let r = f(&[-0.0, 1.0, f32::NAN])
        .lerp(&f(&[-0.0, f32::INFINITY, 1.0]), 0.25)
        .unwrap();
    let r = r.to_vec::<f32>().unwrap();
    assert!(r[0] == 0.0 && r[0].is_sign_positive());
    assert_eq!(r[1], f32::INFINITY);
    assert!(r[2].is_nan());
}
