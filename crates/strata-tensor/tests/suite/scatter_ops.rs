//! Session 60's scans, any/all, nonzero and index/scatter family
//! (`ops/scatter_ops.rs`) against PyTorch 2.15's CPU answers in
//! `tests/data/scatter_ops_s60.json.gz`, written by
//! `benches/anchors/gen_scatter_ops_s60.py` (one thread): random shapes,
//! dtypes and layouts (views of a base storage: contiguous, permuted,
//! strided, offset, expanded), NaN/inf/-0.0, ties, zeros and duplicate
//! indices, compared bit for bit. Then properties against simple
//! references on random shapes and layouts, and hostile inputs (typed
//! errors, nothing written). Literal expected values below were checked in
//! the venv (`/tmp/tv`, PyTorch 2.15) as noted.

use crate::pytorch_fixture::{dtype, fixture, gunzip, ints, num};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Scalar, ScatterReduce, Tensor, TensorError};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/scatter_ops_s60.json.gz"))));

/// A fixture number, "-0" as -0.0 and a bool as 0/1.
fn number(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) if s == "-0" => -0.0,
        v => num(v),
    }
}

/// The view a fixture operand describes (over a fresh base storage).
fn operand(spec: &Value) -> Tensor {
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let base: Vec<f64> = spec["base"]
        .as_array()
        .unwrap()
        .iter()
        .map(number)
        .collect();
    let b = if dt == DType::I64 {
        let v: Vec<i64> = spec["base"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        Tensor::from_slice(&v, &[v.len()], Device::Cpu).unwrap()
    } else {
        Tensor::from_slice(&base, &[base.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
    };
    b.as_strided(
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
        v => Scalar::Float(number(v)),
    }
}

/// Whether `t` is PyTorch's output `want` (dtype, shape, values bit for bit).
fn matches(t: &Tensor, want: &Value) -> std::result::Result<(), String> {
    let dt = dtype(want["dtype"].as_str().unwrap());
    if t.dtype() != dt {
        return Err(format!("dtype {} vs {dt}", t.dtype()));
    }
    let shape: Vec<usize> = ints(&want["shape"]).iter().map(|&s| s as usize).collect();
    if t.shape() != shape {
        return Err(format!("shape {:?} vs {shape:?}", t.shape()));
    }
    let vals = want["values"].as_array().unwrap();
    if matches!(dt, DType::I64 | DType::I32 | DType::U8) {
        let got = t.to_vec_as::<i64>().unwrap();
        let exp: Vec<i64> = vals.iter().map(|v| v.as_i64().unwrap()).collect();
        if got != exp {
            return Err(format!("{got:?} vs {exp:?}"));
        }
        return Ok(());
    }
    let got = t.to_vec_as::<f64>().unwrap();
    let exp: Vec<f64> = vals.iter().map(number).collect();
    let same = got.len() == exp.len()
        && got
            .iter()
            .zip(&exp)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    if same {
        Ok(())
    } else {
        Err(format!("{got:?} vs {exp:?}"))
    }
}

fn reduce_of(name: &str) -> ScatterReduce {
    match name {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" => ScatterReduce::Amax,
        "amin" => ScatterReduce::Amin,
        r => panic!("reduce {r}"),
    }
}

/// strata's answer to one fixture case.
fn answer(c: &Value) -> strata_tensor::Result<Vec<Tensor>> {
    let x = operand(&c["x"]);
    let dim = c["dim"].as_i64().unwrap_or(0);
    let one = |t: Tensor| vec![t];
    Ok(match c["op"].as_str().unwrap() {
        "cumprod" => one(x.cumprod(dim, c["dtype"].as_str().map(dtype))?),
        "cummax" => {
            let (v, i) = x.cummax(dim)?;
            vec![v, i]
        }
        "cummin" => {
            let (v, i) = x.cummin(dim)?;
            vec![v, i]
        }
        "logcumsumexp" => one(x.logcumsumexp(dim)?),
        "any" => one(x.any()?),
        "all" => one(x.all()?),
        "any_dim" => one(x.any_dim(dim, c["keepdim"].as_bool().unwrap())?),
        "all_dim" => one(x.all_dim(dim, c["keepdim"].as_bool().unwrap())?),
        "count_nonzero" => {
            let dims = c["dims"].as_array().map(|_| ints(&c["dims"]));
            one(x.count_nonzero(dims.as_deref())?)
        }
        "nonzero" => one(x.nonzero()?),
        "index_add" => one(x.index_add(
            dim,
            &operand(&c["index"]),
            &operand(&c["src"]),
            scalar(&c["alpha"]),
        )?),
        "index_copy" => one(x.index_copy(dim, &operand(&c["index"]), &operand(&c["src"]))?),
        "index_fill" => one(x.index_fill(dim, &operand(&c["index"]), scalar(&c["value"]))?),
        "scatter" => one(x.scatter(dim, &operand(&c["index"]), &operand(&c["src"]))?),
        "scatter_value" => one(x.scatter_value(dim, &operand(&c["index"]), scalar(&c["value"]))?),
        "scatter_reduce" => one(x.scatter_reduce(
            dim,
            &operand(&c["index"]),
            &operand(&c["src"]),
            reduce_of(c["reduce"].as_str().unwrap()),
            c["include_self"].as_bool().unwrap(),
        )?),
        "index_put" | "index_tensors" => {
            let idx: Vec<Option<Tensor>> = c["indices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (!s.is_null()).then(|| operand(s)))
                .collect();
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|t| t.as_ref()).collect();
            if c["op"] == "index_put" {
                one(x.index_put(
                    &refs,
                    &operand(&c["values"]),
                    c["accumulate"].as_bool().unwrap(),
                )?)
            } else {
                one(x.index_tensors(&refs)?)
            }
        }
        op => panic!("op {op}"),
    })
}

fn class(e: &TensorError) -> &'static str {
    match e {
        TensorError::Index { .. } => "index",
        TensorError::DType { .. } => "dtype",
        _ => "other",
    }
}

#[test]
fn every_case_is_pytorchs() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 1000);
    let mut bad = Vec::new();
    for (n, c) in cases.iter().enumerate() {
        let got = answer(c);
        match (&got, c.get("error")) {
            (Err(e), Some(want)) => {
                if class(e) != want.as_str().unwrap() {
                    bad.push(format!("{n} {}: {e} (PyTorch: {want})", c["op"]));
                }
            }
            (Err(e), None) => bad.push(format!("{n} {}: {e}", c["op"])),
            (Ok(_), Some(want)) => bad.push(format!("{n} {}: succeeded, PyTorch: {want}", c["op"])),
            (Ok(ts), None) => {
                for (t, w) in ts.iter().zip(c["out"].as_array().unwrap()) {
                    if let Err(m) = matches(t, w) {
                        bad.push(format!("{n} {} {}: {m}", c["op"], c["x"]["dtype"]));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} differ: {:#?}",
        bad.len(),
        cases.len(),
        &bad[..bad.len().min(25)]
    );
}

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu).unwrap()
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu).unwrap()
}

/// Checked in the venv: `torch.tensor([1., 3, 3, nan, 2, nan, 5]).cummax(0)`
/// and `torch.tensor([1., 0, 0, -1, nan, -5]).cummin(0)`.
#[test]
fn cummax_ties_and_nan_literals() {
    let n = f64::NAN;
    let (v, i) = t64(&[1.0, 3.0, 3.0, n, 2.0, n, 5.0], &[7])
        .cummax(0)
        .unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 3, 5, 5]);
    let v = v.to_vec::<f64>().unwrap();
    assert_eq!(&v[..3], &[1.0, 3.0, 3.0]);
    assert!(v[3..].iter().all(|x| x.is_nan()));
    let (_, i) = t64(&[1.0, 0.0, 0.0, -1.0, n, -5.0], &[6])
        .cummin(0)
        .unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4, 4]);
    // bool: [F, T, T, F] -> indices [0, 1, 2, 2].
    let b = Tensor::from_slice(&[false, true, true, false], &[4], Device::Cpu).unwrap();
    assert_eq!(
        b.cummax(0).unwrap().1.to_vec::<i64>().unwrap(),
        vec![0, 1, 2, 2]
    );
}

/// `torch.nonzero` is laid out column-major (strides `(1, n)` in PyTorch
/// 2.15: `torch.tensor([[True, False], [True, True]]).nonzero().stride()`).
#[test]
fn nonzero_layout_and_zero_dim() {
    let b = Tensor::from_slice(&[true, false, true, true], &[2, 2], Device::Cpu).unwrap();
    let nz = b.nonzero().unwrap();
    assert_eq!(nz.shape(), &[3, 2]);
    assert_eq!(nz.strides(), &[1, 3]);
    assert_eq!(
        nz.contiguous().unwrap().to_vec::<i64>().unwrap(),
        vec![0, 0, 1, 0, 1, 1]
    );
    // 0-d: [1, 0] or [0, 0] (PyTorch).
    let five = Tensor::scalar(5i64, DType::I64, Device::Cpu).unwrap();
    assert_eq!(five.nonzero().unwrap().shape(), &[1, 0]);
    let zero = Tensor::scalar(0i64, DType::I64, Device::Cpu).unwrap();
    assert_eq!(zero.argwhere().unwrap().shape(), &[0, 0]);
    // NaN is nonzero, -0.0 is zero.
    let x = t64(&[f64::NAN, -0.0], &[2]);
    assert_eq!(x.nonzero().unwrap().to_vec::<i64>().unwrap(), vec![0]);
    // An empty tensor with a huge dim: no elements, nothing allocated.
    let e = Tensor::zeros(&[0, 1 << 40], DType::F32, Device::Cpu).unwrap();
    assert_eq!(e.nonzero().unwrap().shape(), &[0, 2]);
}

/// `any`/`all` of u8 give u8, of everything else bool (PyTorch 2.15).
#[test]
fn any_all_dtypes() {
    let u = Tensor::from_slice(&[1u8, 0], &[2], Device::Cpu).unwrap();
    assert_eq!(u.any().unwrap().dtype(), DType::U8);
    assert_eq!(u.all_dim(0, false).unwrap().dtype(), DType::U8);
    let f = Tensor::zeros(&[2, 0], DType::F16, Device::Cpu).unwrap();
    assert_eq!(
        f.any_dim(1, false).unwrap().to_vec::<bool>().unwrap(),
        vec![false, false]
    );
    assert_eq!(
        f.all_dim(1, false).unwrap().to_vec::<bool>().unwrap(),
        vec![true, true]
    );
    assert!(!f.any().unwrap().item::<bool>().unwrap());
}

/// An empty dim list counts over every dim, as PyTorch 2.15 does (found by
/// session 72's probe of reductions over hostile dims).
#[test]
fn count_nonzero_of_an_empty_dim_list_counts_everything() {
    // torch.count_nonzero(torch.tensor([[1., 0., 2., 3.]]), []) == tensor(3)
    let x = t64(&[1.0, 0.0, 2.0, 3.0], &[1, 4]);
    let n = x.count_nonzero(Some(&[])).unwrap();
    assert_eq!((n.shape(), n.dtype()), (&[][..], DType::I64));
    assert_eq!(n.item::<i64>().unwrap(), 3);
    // torch.count_nonzero(torch.zeros(0, 2, 3), []) == tensor(0)
    let e = Tensor::zeros(&[0, 2, 3], DType::F32, Device::Cpu).unwrap();
    let n = e.count_nonzero(Some(&[])).unwrap();
    assert_eq!((n.shape(), n.item::<i64>().unwrap()), (&[][..], 0));
}

/// Every failing call is a typed error and leaves self as it was.
#[test]
fn hostile_inputs_are_typed_errors_and_change_nothing() {
    let x = t64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let before = x.deep_clone().unwrap();
    let idx = i64s(&[0, 2], &[2]);
    let src = t64(&[1.0; 4], &[2, 2]);
    // Dims.
    assert!(matches!(x.cumprod(2, None), Err(TensorError::Dim { .. })));
    assert!(matches!(x.cummax(-3), Err(TensorError::Dim { .. })));
    assert!(matches!(x.any_dim(5, false), Err(TensorError::Dim { .. })));
    assert!(matches!(
        x.count_nonzero(Some(&[0, -2])),
        Err(TensorError::Dim { .. })
    ));
    assert!(matches!(
        x.index_add_(2, &idx, &src, 1),
        Err(TensorError::Dim { .. })
    ));
    // Dtypes.
    assert!(matches!(
        i64s(&[1, 2], &[2]).logcumsumexp(0),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        x.cumprod(0, Some(DType::Bool)),
        Err(TensorError::DType { .. })
    ));
    let fidx = t64(&[0.0, 1.0], &[2]);
    assert!(matches!(
        x.index_add_(1, &fidx, &src, 1),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        x.index_copy_(1, &idx.to_dtype(DType::I32).unwrap(), &src),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        x.index_fill_(1, &idx.to_dtype(DType::I32).unwrap(), 1.0),
        Err(TensorError::DType { .. })
    ));
    let src32 = src.to_dtype(DType::F32).unwrap();
    assert!(matches!(
        x.index_add_(1, &idx, &src32, 1),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        x.scatter_(1, &i64s(&[0, 1], &[1, 2]), &src32),
        Err(TensorError::DType { .. })
    ));
    let b = Tensor::from_slice(&[true, false], &[2], Device::Cpu).unwrap();
    assert!(matches!(
        b.scatter_reduce(0, &i64s(&[0], &[1]), &b, ScatterReduce::Mean, true),
        Err(TensorError::DType { .. })
    ));
    let ix8 = Tensor::from_slice(&[1u8, 0], &[2], Device::Cpu).unwrap();
    assert!(matches!(
        x.index_put_(&[Some(&ix8)], &t64(&[0.0], &[]), false),
        Err(TensorError::DType { .. })
    ));
    // Index values (PyTorch: "index 3 is out of bounds for dimension 1 with size 3").
    let bad = i64s(&[0, 3], &[2]);
    assert!(matches!(
        x.index_add_(1, &bad, &src, 1),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_copy_(1, &bad, &src),
        Err(TensorError::Index { .. })
    ));
    // index_fill counts negative indices from the end, as PyTorch does: -4
    // is out of [-3, 3) (PyTorch: "index -4 is out of bounds for dimension
    // 1 with size 3").
    assert!(matches!(
        x.index_fill_(1, &i64s(&[-4], &[1]), 0.0),
        Err(TensorError::Index { .. })
    ));
    let bad2 = i64s(&[0, 3], &[1, 2]);
    assert!(matches!(
        x.scatter_(1, &bad2, &src),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.scatter_value_(1, &bad2, 1.0),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.scatter_reduce_(1, &bad2, &src, ScatterReduce::Amax, false),
        Err(TensorError::Index { .. })
    ));
    let v = t64(&[9.0], &[]);
    assert!(matches!(
        x.index_put_(&[Some(&i64s(&[-3], &[1]))], &v, false),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_put_(&[Some(&i64s(&[2], &[1]))], &v, true),
        Err(TensorError::Index { .. })
    ));
    // index_put's own rules.
    assert!(matches!(
        x.index_put_(&[None, None], &v, false),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_put_(&[], &v, false),
        Err(TensorError::Index { .. })
    ));
    let i0 = i64s(&[0], &[1]);
    assert!(matches!(
        x.index_put_(&[Some(&i0), Some(&i0), Some(&i0)], &v, false),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_put_(
            &[Some(&i64s(&[0, 1], &[2])), Some(&i64s(&[0, 1, 2], &[3]))],
            &v,
            false
        ),
        Err(TensorError::Index { .. })
    ));
    let mask = Tensor::from_slice(&[true, false], &[2], Device::Cpu).unwrap();
    assert!(matches!(
        x.index_put_(&[None, Some(&mask)], &v, false),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_put_(&[Some(&i0)], &t64(&[1.0, 2.0], &[2]), false),
        Err(TensorError::Shape { .. })
    ));
    // Shapes.
    assert!(matches!(
        x.index_add_(1, &idx, &t64(&[1.0; 6], &[3, 2]), 1),
        Err(TensorError::Shape { .. })
    ));
    assert!(matches!(
        x.index_add_(1, &i64s(&[0], &[1]), &src, 1),
        Err(TensorError::Shape { .. })
    ));
    assert!(matches!(
        x.index_add_(1, &i64s(&[0, 1], &[2, 1]), &src, 1),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.scatter_(0, &i64s(&[0, 1, 1], &[1, 3]), &src),
        Err(TensorError::Shape { .. })
    ));
    // Values a dtype cannot hold.
    let xi = Tensor::zeros(&[3], DType::U8, Device::Cpu).unwrap();
    assert!(matches!(
        xi.index_fill(0, &i0, 300),
        Err(TensorError::Value { .. })
    ));
    assert!(matches!(
        xi.scatter_value(0, &i0, 300),
        Err(TensorError::Value { .. })
    ));
    // Memory: self aliasing itself, sources sharing self's memory.
    let e = t64(&[1.0, 2.0], &[2, 1]).expand(&[2, 3]).unwrap();
    assert!(matches!(
        e.index_fill_(1, &idx, 0.0),
        Err(TensorError::Overlap { .. })
    ));
    assert!(matches!(
        x.index_add_(0, &i64s(&[0, 1], &[2]), &x, 1),
        Err(TensorError::Overlap { .. })
    ));
    assert!(matches!(
        x.scatter_(1, &i64s(&[0, 1], &[1, 2]), &x.narrow(1, 0, 2).unwrap()),
        Err(TensorError::Overlap { .. })
    ));
    assert!(x.equal(&before).unwrap());
    // Huge empty tensors: nothing to do, nothing allocated.
    let huge = Tensor::zeros(&[0, 1 << 40], DType::F32, Device::Cpu).unwrap();
    assert_eq!(huge.cumprod(1, None).unwrap().shape(), &[0, 1 << 40]);
    assert_eq!(huge.cummax(1).unwrap().1.shape(), &[0, 1 << 40]);
    assert_eq!(huge.count_nonzero(Some(&[1])).unwrap().shape(), &[0]);
}

/// A simple reference of `t` (row-major values of an [m, n] f64 tensor).
fn rows(t: &Tensor) -> Vec<f64> {
    t.contiguous().unwrap().to_vec_as::<f64>().unwrap()
}

/// An [m, n] f64 tensor of `v`, contiguous or as the transpose of an
/// [n, m] base.
fn laid_out(v: &[f64], m: usize, n: usize, transposed: bool) -> Tensor {
    if !transposed {
        return t64(v, &[m, n]);
    }
    let mut tv = vec![0.0; v.len()];
    for i in 0..m {
        for j in 0..n {
            tv[j * m + i] = v[i * n + j];
        }
    }
    t64(&tv, &[n, m]).t().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Scans, index_add, scatter_reduce and nonzero against loops over the
    /// row-major values, on contiguous and transposed inputs.
    #[test]
    fn ops_match_simple_references(
        m in 1usize..5,
        n in 1usize..6,
        raw in proptest::collection::vec(-3i32..4, 30),
        picks in proptest::collection::vec(0usize..100, 12),
        transposed in any::<bool>(),
        dim in 0usize..2,
    ) {
        let v: Vec<f64> = raw[..m * n].iter().map(|&x| f64::from(x)).collect();
        let x = laid_out(&v, m, n, transposed);
        let at = |i: usize, j: usize| v[i * n + j];
        let (outer, len) = if dim == 0 { (n, m) } else { (m, n) };
        let pos = |o: usize, k: usize| if dim == 0 { (k, o) } else { (o, k) };
        // cumprod / cummax.
        let mut cp = vec![0.0; m * n];
        let mut cm = vec![0i64; m * n];
        for o in 0..outer {
            let (mut acc, mut best, mut bi) = (1.0, f64::NEG_INFINITY, 0i64);
            for k in 0..len {
                let (i, j) = pos(o, k);
                acc *= at(i, j);
                cp[i * n + j] = acc;
                if k == 0 || at(i, j) >= best {
                    best = at(i, j);
                    bi = k as i64;
                }
                cm[i * n + j] = bi;
            }
        }
        prop_assert_eq!(rows(&x.cumprod(dim as i64, None).unwrap()), cp);
        prop_assert_eq!(x.cummax(dim as i64).unwrap().1.contiguous().unwrap().to_vec::<i64>().unwrap(), cm);
        // index_add along dim 1 with duplicates.
        let k = picks.len().min(6);
        let idx: Vec<i64> = picks[..k].iter().map(|&p| (p % n) as i64).collect();
        let src: Vec<f64> = (0..m * k).map(|q| (q % 7) as f64 - 3.0).collect();
        let mut ia = v.clone();
        for i in 0..m {
            for (c, &t) in idx.iter().enumerate() {
                ia[i * n + t as usize] += 2.0 * src[i * k + c];
            }
        }
        let got = x.index_add(1, &i64s(&idx, &[k]), &t64(&src, &[m, k]), 2.0).unwrap();
        prop_assert_eq!(rows(&got), ia);
        // scatter_reduce amax (without self) along dim 1.
        let sidx: Vec<i64> = (0..m * k).map(|q| (picks[q % picks.len()] % n) as i64).collect();
        let mut am = v.clone();
        let mut touched = vec![false; m * n];
        for i in 0..m {
            for c in 0..k {
                let p = i * n + sidx[i * k + c] as usize;
                let s = src[i * k + c];
                am[p] = if touched[p] { am[p].max(s) } else { s };
                touched[p] = true;
            }
        }
        let got = x
            .scatter_reduce(1, &i64s(&sidx, &[m, k]), &t64(&src, &[m, k]), ScatterReduce::Amax, false)
            .unwrap();
        prop_assert_eq!(rows(&got), am);
        // nonzero: the coordinates of nonzero values in row-major order.
        let mut nz = Vec::new();
        for i in 0..m {
            for j in 0..n {
                if at(i, j) != 0.0 {
                    nz.extend([i as i64, j as i64]);
                }
            }
        }
        prop_assert_eq!(x.nonzero().unwrap().contiguous().unwrap().to_vec::<i64>().unwrap(), nz);
        prop_assert_eq!(
            x.count_nonzero(None).unwrap().item::<i64>().unwrap(),
            (v.iter().filter(|&&a| a != 0.0).count()) as i64
        );
    }
}

/// In-place ops write through views (a transposed view of a base) and
/// bump the version; the index_put offsets address the view's strides.
#[test]
fn inplace_ops_write_through_views() {
    let base = t64(&[0.0; 6], &[3, 2]);
    let v = base.t().unwrap(); // [2, 3], strides [1, 2]
    v.index_fill_(1, &i64s(&[2], &[1]), 7.0).unwrap();
    assert_eq!(rows(&base), vec![0.0, 0.0, 0.0, 0.0, 7.0, 7.0]);
    v.index_put_(
        &[Some(&i64s(&[1], &[1])), Some(&i64s(&[0], &[1]))],
        &t64(&[5.0], &[]),
        false,
    )
    .unwrap();
    assert_eq!(rows(&base), vec![0.0, 5.0, 0.0, 0.0, 7.0, 7.0]);
    v.scatter_reduce_(
        0,
        &i64s(&[1, 1, 1], &[1, 3]),
        &t64(&[1.0, 2.0, 3.0], &[1, 3]),
        ScatterReduce::Sum,
        true,
    )
    .unwrap();
    assert_eq!(rows(&base), vec![0.0, 6.0, 0.0, 2.0, 7.0, 10.0]);
    let _ = Scalar::Int(0);
}

/// `index_put(accumulate=True)` adds in the order PyTorch's CPU iterator
/// visits the index positions: the values' strides order the index dims
/// (innermost first), not row-major. PyTorch 2.15's answer for this case
/// (values of shape [3, 3, 4] with strides [1, 3, 9], a [3, 3] index into
/// the 2 rows; fresh seed 6384 of gen_scatter_ops_s60.py) differs from the
/// row-major sums in the last bit of two elements.
#[test]
fn index_put_accumulates_in_pytorchs_position_order() {
    let x = Tensor::from_slice(
        &[-2.0f32, -0.614, -1.849, 1.446, -2.294, -1.434, -1.745, -3.0],
        &[2, 4],
        Device::Cpu,
    )
    .unwrap();
    let idx =
        Tensor::from_slice(&[-2i64, 0, -1, -2, 1, 0, 0, 1, -1], &[3, 3], Device::Cpu).unwrap();
    let base: [f32; 36] = [
        1.177, 0.08, 2.341, -1.713, 3.0, 0.0, 0.0, -1.394, -2.092, -2.235, -1.0, -0.114, 1.698,
        0.144, -1.174, -0.0, -0.92, -0.003, -1.353, -0.0, -2.123, 0.145, -0.6, -0.34, -0.0, 1.0,
        0.0, -0.233, -0.0, -0.86, 1.701, 1.968, 2.0, -2.145, 3.0, 0.865,
    ];
    let values = Tensor::from_slice(&base, &[36], Device::Cpu)
        .unwrap()
        .as_strided(&[3, 3, 4], &[1, 3, 9], Some(0))
        .unwrap();
    // PyTorch's f32 results, printed as f64 (each converts back exactly).
    let want: [f64; 8] = [
        -1.5090000629425049,
        -3.18500018119812,
        -4.179999828338623,
        5.053999900817871,
        -1.3859999179840088,
        -2.4670000076293945,
        -2.684999942779541,
        -0.3119999170303345,
    ];
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    let got = x.index_put(&[Some(&idx)], &values, true).unwrap();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.to_vec::<f32>().unwrap()), bits(&want));
    // The in-place form adds in the same order.
    x.index_put_(&[Some(&idx)], &values, true).unwrap();
    assert_eq!(bits(&x.to_vec::<f32>().unwrap()), bits(&want));
}
