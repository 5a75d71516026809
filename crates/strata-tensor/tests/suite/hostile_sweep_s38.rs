//! Session 38's sweep, checked against PyTorch 2.15 (CPU, x86 without
//! AVX-512, one thread):
//!
//! * the sign of the exact zeros that `addmm` returns, replayed against
//!   PyTorch's answers in `tests/data/addmm_zero_signs_s38.json.gz` (written by
//!   `benches/anchors/gen_addmm_zero_signs_s38.py`);
//! * empty tensors whose other dims are huge (`[2^62, 2, 0]`): creation,
//!   views, reductions, products, joins;
//! * `allclose` and `equal` across dtypes.
//!
//! Defects these tests found (fixed with them):
//!
//! * `addmm` with a -0.0 bias and products that are all -0.0 gave +0.0
//!   where PyTorch gives -0.0 (f32/f64 with k = 1, where its BLAS adds the
//!   product to the bias; f16/bf16 where its `gemm_transb_` kernel
//!   accumulates into the bias: a column-major `mat1` with a row-major
//!   `mat2`), and f16/bf16 kept -0.0 where PyTorch's dot-product kernels
//!   (every other layout, and k = 1) sum the products from +0.0 and add the
//!   bias after (+0.0). The `gemm` crate adds its sum, formed from +0.0, to
//!   the destination. For f32/f64 with k >= 2 the sign is MKL's kernel's
//!   choice (it changes with the size, the layouts, and the tile of the
//!   result), which strata does not reproduce: it keeps -0.0 there.
//! * A contiguous tensor's shape had to have a product of its sizes, each
//!   counted as at least 1, within `i64::MAX`, so `zeros([2^62, 2, 0])`
//!   (and the empty results of reductions, products and joins of such
//!   tensors) was a size error where PyTorch makes the tensor: its rules
//!   are that the strides (which leave out the first size) fit i64 and
//!   that the product of the sizes, taken in order, does not overflow.
//! * `allclose` of two dtypes promoted them; PyTorch raises ("Long did not
//!   match Float"), before it looks at the tolerances or the shapes. Integer
//!   and bool tensors are compared in f32 (PyTorch's default dtype) where
//!   the tolerances are not both zero, so 2^53 + 1 and 2^53 are close with
//!   atol 0.5 (session 27 had made that comparison exact; its test now
//!   states PyTorch's answers).

use crate::pytorch_fixture::gunzip;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor, TensorError};

static ADDMM_SIGNS: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/addmm_zero_signs_s38.json.gz")));

fn dtype(s: &str) -> DType {
    match s {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        other => panic!("bad dtype {other}"),
    }
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// The sign bits of a tensor of zeros, as the fixture writes them.
fn sign_string(t: &Tensor) -> String {
    let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let s: String = v
        .iter()
        .map(|x| {
            assert_eq!(*x, 0.0, "addmm of zeros gave {x}");
            if x.is_sign_negative() {
                '1'
            } else {
                '0'
            }
        })
        .collect();
    if !s.is_empty() && s.chars().all(|c| c == s.as_bytes()[0] as char) {
        s[..1].to_string()
    } else {
        s
    }
}

/// `t`'s values in a fresh matrix of the strides PyTorch's operand had
/// (row-major, column-major, or either for a row or column of one).
fn strided(t: &Tensor, strides: &Value) -> Tensor {
    let st: Vec<i64> = usizes(strides).iter().map(|&x| x as i64).collect();
    let size: Vec<i64> = t.shape().iter().map(|&x| x as i64).collect();
    let base = Tensor::zeros(&[t.numel()], t.dtype(), Device::Cpu).unwrap();
    let v = base.as_strided(&size, &st, Some(0)).unwrap();
    v.copy_(t).unwrap();
    v
}

#[test]
fn addmm_zero_signs_match_pytorch() {
    let fx: Value = serde_json::from_str(&ADDMM_SIGNS).unwrap();
    let cases = fx["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let (m, k, n) = (
            c["m"].as_u64().unwrap() as usize,
            c["k"].as_u64().unwrap() as usize,
            c["n"].as_u64().unwrap() as usize,
        );
        let row: Vec<f64> = (0..k)
            .map(|i| match c["prod"].as_str().unwrap() {
                "pos" => 1.0,
                "neg" => -1.0,
                _ => {
                    if i % 2 == 0 {
                        1.0
                    } else {
                        -1.0
                    }
                }
            })
            .collect();
        let data: Vec<f64> = (0..m).flat_map(|_| row.iter().copied()).collect();
        let a = Tensor::from_vec(data, &[m, k], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let a = strided(&a, &c["mat1_strides"]);
        let b = strided(
            &Tensor::zeros(&[k, n], dt, Device::Cpu).unwrap(),
            &c["mat2_strides"],
        );
        let bias_v = if c["bias_neg"].as_bool().unwrap() {
            -0.0
        } else {
            0.0
        };
        let bias = Tensor::full(&usizes(&c["bias_shape"]), bias_v, dt, Device::Cpu).unwrap();
        let got = sign_string(&bias.addmm(&a, &b).unwrap());
        let want = c["signs"].as_str().unwrap();
        if got != want {
            bad.push(format!(
                "{} m{m} k{k} n{n} prod {} bias {} {:?} strides {} {}: want {}, got {}",
                c["dtype"],
                c["prod"],
                bias_v,
                usizes(&c["bias_shape"]),
                c["mat1_strides"],
                c["mat2_strides"],
                &want[..want.len().min(8)],
                &got[..got.len().min(8)]
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} addmm cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

/// `Ok(shape)` of a result, or `Err(message)` for a typed error.
fn outcome(r: strata_tensor::Result<Tensor>) -> Result<Vec<usize>, String> {
    r.map(|t| t.shape().to_vec()).map_err(|e| e.to_string())
}

const B: usize = 1 << 62;

/// Empty tensors whose other dims are huge, each beside PyTorch 2.15's
/// answer for the same call (CPU): an empty result where PyTorch has one,
/// an error (typed, never a panic or a wrapped size) where PyTorch raises
/// ("Storage size calculation overflowed", "Trying to create tensor with
/// negative dimension", or its SymInt representation errors).
#[test]
fn empty_tensors_with_huge_dims_match_pytorch() {
    let f32 = DType::F32;
    let cpu = Device::Cpu;
    let x = Tensor::zeros(&[B, 2, 0], f32, cpu).unwrap();
    assert_eq!(x.shape(), &[B, 2, 0]);
    let e = |shape: &[usize]| Tensor::zeros(shape, f32, cpu).unwrap();
    let mut bad = Vec::new();
    let ok =
        |name: &str, r: strata_tensor::Result<Tensor>, want: &[usize], bad: &mut Vec<String>| {
            match outcome(r) {
                Ok(s) if s == want => {}
                other => bad.push(format!("{name}: want Ok({want:?}), got {other:?}")),
            }
        };
    let err = |name: &str, r: strata_tensor::Result<Tensor>, bad: &mut Vec<String>| {
        if let Ok(s) = outcome(r) {
            bad.push(format!("{name}: want an error, got Ok({s:?})"));
        }
    };
    // torch.zeros: [2^62, 4, 0] and [2^40, 2^40, 0] overflow the strides.
    err(
        "zeros [2^62,4,0]",
        Tensor::zeros(&[B, 4, 0], f32, cpu),
        &mut bad,
    );
    err(
        "zeros [2^40,2^40,0]",
        Tensor::zeros(&[1 << 40, 1 << 40, 0], f32, cpu),
        &mut bad,
    );
    ok(
        "zeros [i64::MAX,1,0]",
        Tensor::zeros(&[i64::MAX as usize, 1, 0], f32, cpu),
        &[i64::MAX as usize, 1, 0],
        &mut bad,
    );
    ok(
        "zeros [2^31,2^31,0,4]",
        Tensor::zeros(&[1 << 31, 1 << 31, 0, 4], f32, cpu),
        &[1 << 31, 1 << 31, 0, 4],
        &mut bad,
    );
    err(
        "zeros [2^31,2^31,4]",
        Tensor::zeros(&[1 << 31, 1 << 31, 4], f32, cpu),
        &mut bad,
    );
    err("ones [2^62,2]", Tensor::ones(&[B, 2], f32, cpu), &mut bad);
    // Views and reshapes.
    ok("reshape [0]", x.reshape(&[0]), &[0], &mut bad);
    ok("reshape [-1]", x.reshape(&[-1]), &[0], &mut bad);
    ok(
        "reshape [2^62,0]",
        x.reshape(&[B as i64, 0]),
        &[B, 0],
        &mut bad,
    );
    err("reshape [0,2^62,2]", x.reshape(&[0, B as i64, 2]), &mut bad);
    ok("reshape [-1,2]", x.reshape(&[-1, 2]), &[0, 2], &mut bad);
    ok("view [2,-1]", x.view(&[2, -1]), &[2, 0], &mut bad);
    ok("flatten", x.flatten(0, -1), &[0], &mut bad);
    ok(
        "transpose",
        x.transpose(0, 2).and_then(|t| t.contiguous()),
        &[0, 2, B],
        &mut bad,
    );
    ok(
        "expand",
        e(&[1, 2, 0]).expand(&[B as i64, 2, 0]),
        &[B, 2, 0],
        &mut bad,
    );
    ok(
        "expand contiguous",
        e(&[1, 2, 0])
            .expand(&[B as i64, 2, 0])
            .and_then(|t| t.contiguous()),
        &[B, 2, 0],
        &mut bad,
    );
    ok("narrow", x.narrow(0, 1, 5), &[5, 2, 0], &mut bad);
    // Reductions: over dims 0 or 1 the result is empty; over the 0-sized
    // dim 2 it is [2^62, 2], too large to allocate.
    ok("sum dim0", x.sum(Some(&[0]), false), &[2, 0], &mut bad);
    ok("sum dim1", x.sum(Some(&[1]), false), &[B, 0], &mut bad);
    err("sum dim2", x.sum(Some(&[2]), false), &mut bad);
    err("sum dim2 keepdim", x.sum(Some(&[2]), true), &mut bad);
    ok("sum all", x.sum(None, false), &[], &mut bad);
    ok("mean all", x.mean(None, false), &[], &mut bad);
    ok("mean dim0", x.mean(Some(&[0]), false), &[2, 0], &mut bad);
    err("mean dim2", x.mean(Some(&[2]), false), &mut bad);
    ok("var dim0", x.var(Some(&[0]), 1.0, false), &[2, 0], &mut bad);
    err("var dim2", x.var(Some(&[2]), 1.0, false), &mut bad);
    ok("std all", x.std(None, 1.0, false), &[], &mut bad);
    err("logsumexp dim2", x.logsumexp(&[2], false), &mut bad);
    ok("argmax dim0", x.argmax(Some(0), false), &[2, 0], &mut bad);
    err("max_dim 2", x.max_dim(2, false).map(|p| p.0), &mut bad);
    ok(
        "min_dim 0",
        x.min_dim(0, false).map(|p| p.0),
        &[2, 0],
        &mut bad,
    );
    err("max all", x.max(), &mut bad);
    ok("cumsum 0", x.cumsum(0, None), &[B, 2, 0], &mut bad);
    ok("softmax 2", x.softmax(2, None), &[B, 2, 0], &mut bad);
    ok("softmax 0", x.softmax(0, None), &[B, 2, 0], &mut bad);
    // Sums over everything: 0 (mean NaN).
    assert_eq!(x.sum(None, false).unwrap().item::<f32>().unwrap(), 0.0);
    assert!(x.mean(None, false).unwrap().item::<f32>().unwrap().is_nan());
    // Matrix products.
    err(
        "bmm [B,2,0]@[B,0,3]",
        x.bmm(&e(&[1, 0, 3]).expand(&[B as i64, 0, 3]).unwrap()),
        &mut bad,
    );
    err(
        "matmul [B,2,0]@[B,0,3]",
        x.matmul(&e(&[1, 0, 3]).expand(&[B as i64, 0, 3]).unwrap()),
        &mut bad,
    );
    // torch.empty(B, 0, 2) @ torch.empty(2, 3) is [B, 0, 3]: PyTorch folds
    // the empty batch into the rows (strata expanded the matrix to
    // [B, 2, 3], a size error).
    ok(
        "matmul [B,0,2]@[2,3]",
        e(&[B, 0, 2]).matmul(&e(&[2, 3])),
        &[B, 0, 3],
        &mut bad,
    );
    ok(
        "mm [0,B]@[B,0]",
        e(&[0, B]).mm(&e(&[B, 0])),
        &[0, 0],
        &mut bad,
    );
    err("mm [2,0]@[0,B]", e(&[2, 0]).mm(&e(&[0, B])), &mut bad);
    err("mm [B,0]@[0,2]", e(&[B, 0]).mm(&e(&[0, 2])), &mut bad);
    ok(
        "mm [B,0]@[0,0]",
        e(&[B, 0]).mm(&e(&[0, 0])),
        &[B, 0],
        &mut bad,
    );
    ok(
        "addmm [0]+[0,B]@[B,0]",
        e(&[0]).addmm(&e(&[0, B]), &e(&[B, 0])),
        &[0, 0],
        &mut bad,
    );
    // Joins: along dim 0 the size 2^63 does not fit i64; along dim 1 the
    // strides of [2^62, 4, 0] overflow; along dim 2 the result is x's shape.
    ok("cat dim2", Tensor::cat(&[&x, &x], 2), &[B, 2, 0], &mut bad);
    err("cat dim0", Tensor::cat(&[&x, &x], 0), &mut bad);
    err("cat dim1", Tensor::cat(&[&x, &x], 1), &mut bad);
    err("stack", Tensor::stack(&[&x, &x], 0), &mut bad);
    // Element-wise.
    ok("add", x.add(1.0), &[B, 2, 0], &mut bad);
    // torch.empty(B, 1, 1) cannot be made; an expanded [1, 1, 1] broadcasts.
    err(
        "zeros [B,1,1]",
        Tensor::zeros(&[B, 1, 1], f32, cpu),
        &mut bad,
    );
    ok(
        "add broadcast [B,1,1]",
        x.add(&e(&[1, 1, 1]).expand(&[B as i64, 1, 1]).unwrap()),
        &[B, 2, 0],
        &mut bad,
    );
    ok("to f64", x.to_dtype(DType::F64), &[B, 2, 0], &mut bad);
    ok("deep_clone", x.deep_clone(), &[B, 2, 0], &mut bad);
    ok(
        "where",
        Tensor::where_cond(&x.gt(0.0).unwrap(), &x, &x),
        &[B, 2, 0],
        &mut bad,
    );
    ok(
        "masked_fill",
        x.masked_fill(&x.gt(0.0).unwrap(), 1.0),
        &[B, 2, 0],
        &mut bad,
    );
    ok("full_like", x.full_like(3.0, None), &[B, 2, 0], &mut bad);
    ok("tril", x.tril(0), &[B, 2, 0], &mut bad);
    ok(
        "index_select",
        x.index_select(0, &Tensor::from_slice(&[0i64, 1], &[2], cpu).unwrap()),
        &[2, 2, 0],
        &mut bad,
    );
    ok(
        "gather",
        x.gather(2, &Tensor::zeros(&[B, 2, 0], DType::I64, cpu).unwrap()),
        &[B, 2, 0],
        &mut bad,
    );
    ok(
        "embedding",
        Tensor::embedding(
            &Tensor::zeros(&[B, 0], DType::I64, cpu).unwrap(),
            &e(&[3, 2]),
            None,
        ),
        &[B, 0, 2],
        &mut bad,
    );
    match x.chunk(3, 0) {
        Ok(v) => assert_eq!(v.len(), 3),
        Err(e) => bad.push(format!("chunk: {e}")),
    }
    match x.split(1i64 << 61, 0) {
        Ok(v) => assert_eq!(v.len(), 2),
        Err(e) => bad.push(format!("split: {e}")),
    }
    assert!(
        bad.is_empty(),
        "{} differ from PyTorch:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// `torch.allclose` of tensors of two dtypes raises ("Long did not match
/// Float"), before it looks at the tolerances or the shapes; `torch.equal`
/// compares after type promotion. PyTorch 2.15 (CPU):
///
/// ```python
/// torch.allclose(torch.tensor([1, 2]), torch.tensor([1., 2.]))      # Long did not match Float
/// torch.allclose(torch.tensor(0.), torch.tensor(0., dtype=torch.float64))  # Float did not match Double
/// torch.allclose(torch.zeros(3), torch.zeros(2, dtype=torch.long))  # Float did not match Long
/// torch.allclose(torch.tensor([1., 2.]), torch.tensor([1, 2]), rtol=-1)  # Float did not match Long
/// torch.allclose(torch.zeros(0), torch.zeros(0, dtype=torch.long))  # Float did not match Long
/// torch.allclose(bool [T, F], uint8 [1, 2])                          # Bool did not match Byte
/// torch.allclose(bool [T], bool [F], rtol=0, atol=1)                 # True (compared in f32)
/// torch.allclose(bool [T], bool [F], rtol=0, atol=.5)                # False
/// torch.allclose(uint8 [12], uint8 [10], rtol=0, atol=2)             # True (no u8 wrap)
/// torch.allclose(uint8 [0], uint8 [255], rtol=0, atol=1)             # False
/// torch.allclose(int32 [2^31-1], int32 [-2^31], rtol=0, atol=1)      # False
/// torch.allclose(int64 [2^63-1], int64 [-1], rtol=0, atol=1)         # False
/// torch.equal(bool [T, F], uint8 [1, 0])                             # True
/// torch.equal(int64 [2^53+1], float64 [2^53])                        # True
/// torch.equal(int64 [2^24+1], float32 [2^24])                        # True
/// torch.equal(float64 [0.1], float32 [0.1])                          # False
/// torch.equal(torch.zeros(0), torch.zeros(0, dtype=torch.long))     # True
/// ```
#[test]
fn allclose_of_two_dtypes_is_an_error_as_in_pytorch() {
    let cpu = Device::Cpu;
    let i = Tensor::from_slice(&[1i64, 2], &[2], cpu).unwrap();
    let f = Tensor::from_slice(&[1.0f32, 2.0], &[2], cpu).unwrap();
    let is_dtype = |r: strata_tensor::Result<bool>| matches!(r, Err(TensorError::DType { .. }));
    assert!(is_dtype(i.allclose(&f, 1e-5, 1e-8)));
    assert!(is_dtype(f.allclose(&i, 1e-5, 1e-8)));
    assert!(is_dtype(f.allclose(&i, 0.0, 0.0)));
    let f0 = Tensor::scalar(0.0, DType::F32, cpu).unwrap();
    let d0 = Tensor::scalar(0.0, DType::F64, cpu).unwrap();
    assert!(is_dtype(f0.allclose(&d0, 1e-5, 1e-8)));
    // Before the shapes, the tolerances and emptiness.
    let z3 = Tensor::zeros(&[3], DType::F32, cpu).unwrap();
    let z2 = Tensor::zeros(&[2], DType::I64, cpu).unwrap();
    assert!(is_dtype(z3.allclose(&z2, 1e-5, 1e-8)));
    assert!(is_dtype(f.allclose(&i, -1.0, 0.0)));
    let e32 = Tensor::zeros(&[0], DType::F32, cpu).unwrap();
    let e64 = Tensor::zeros(&[0], DType::I64, cpu).unwrap();
    assert!(is_dtype(e32.allclose(&e64, 1e-5, 1e-8)));
    let b = Tensor::from_slice(&[true, false], &[2], cpu).unwrap();
    let u = Tensor::from_slice(&[1u8, 2], &[2], cpu).unwrap();
    assert!(is_dtype(b.allclose(&u, 1e-5, 1e-8)));
    let h = f.to_dtype(DType::F16).unwrap();
    let bf = f.to_dtype(DType::BF16).unwrap();
    assert!(is_dtype(h.allclose(&bf, 1e-5, 1e-8)));
    // One dtype: bool and integers are compared in f32.
    let t = Tensor::from_slice(&[true], &[1], cpu).unwrap();
    let fa = Tensor::from_slice(&[false], &[1], cpu).unwrap();
    assert!(t.allclose(&fa, 0.0, 1.0).unwrap());
    assert!(!t.allclose(&fa, 0.0, 0.5).unwrap());
    let u8s = |v: u8| Tensor::from_slice(&[v], &[1], cpu).unwrap();
    assert!(u8s(12).allclose(&u8s(10), 0.0, 2.0).unwrap());
    assert!(u8s(10).allclose(&u8s(12), 0.0, 2.0).unwrap());
    assert!(!u8s(0).allclose(&u8s(255), 0.0, 1.0).unwrap());
    let i32s = |v: i32| Tensor::from_slice(&[v], &[1], cpu).unwrap();
    assert!(!i32s(i32::MAX).allclose(&i32s(i32::MIN), 0.0, 1.0).unwrap());
    let i64s = |v: i64| Tensor::from_slice(&[v], &[1], cpu).unwrap();
    assert!(!i64s(i64::MAX).allclose(&i64s(-1), 0.0, 1.0).unwrap());
    assert!(!i64s(i64::MIN).allclose(&i64s(0), 0.0, 1.0).unwrap());
    // torch.equal promotes.
    let u10 = Tensor::from_slice(&[1u8, 0], &[2], cpu).unwrap();
    assert!(b.equal(&u10).unwrap());
    let d53 = Tensor::from_slice(&[2f64.powi(53)], &[1], cpu).unwrap();
    assert!(i64s((1 << 53) + 1).equal(&d53).unwrap());
    let f24 = Tensor::from_slice(&[2f32.powi(24)], &[1], cpu).unwrap();
    assert!(i64s((1 << 24) + 1).equal(&f24).unwrap());
    let d01 = Tensor::from_slice(&[0.1f64], &[1], cpu).unwrap();
    let f01 = Tensor::from_slice(&[0.1f32], &[1], cpu).unwrap();
    assert!(!d01.equal(&f01).unwrap());
    assert!(e32.equal(&e64).unwrap());
}

/// PyTorch 2.15 checks `addmm`'s dtypes, then its shapes and the bias's
/// broadcast, and only then finds bool unsupported:
///
/// ```python
/// b = lambda *s: torch.zeros(*s, dtype=torch.bool)
/// torch.addmm(b(2), b(2, 3), b(2, 2))  # mat1 and mat2 shapes cannot be multiplied
/// torch.addmm(b(3), b(2, 2), b(2, 2))  # The expanded size of the tensor (2) must match ...
/// torch.addmm(b(2), b(2), b(2, 2))     # self must be a matrix, got 1-D tensor
/// torch.addmm(b(2), b(2, 2), b(2, 2))  # "addmm_impl_cpu_" not implemented for 'Bool'
/// torch.addmm(zeros(3), zeros(2, 2, dtype=float64), zeros(2, 3))  # mat1 and mat2 must have the same dtype
/// ```
#[test]
fn addmm_checks_shapes_before_bool_as_pytorch() {
    let b = |s: &[usize]| Tensor::zeros(s, DType::Bool, Device::Cpu).unwrap();
    let shape = |r: strata_tensor::Result<Tensor>| matches!(r, Err(TensorError::Shape { .. }));
    let dtype = |r: strata_tensor::Result<Tensor>| matches!(r, Err(TensorError::DType { .. }));
    assert!(shape(b(&[2]).addmm(&b(&[2, 3]), &b(&[2, 2]))));
    assert!(shape(b(&[3]).addmm(&b(&[2, 2]), &b(&[2, 2]))));
    assert!(shape(b(&[2]).addmm(&b(&[2]), &b(&[2, 2]))));
    assert!(dtype(b(&[2]).addmm(&b(&[2, 2]), &b(&[2, 2]))));
    let z = |s: &[usize], d: DType| Tensor::zeros(s, d, Device::Cpu).unwrap();
    assert!(dtype(
        z(&[3], DType::F32).addmm(&z(&[2, 2], DType::F64), &z(&[2, 3], DType::F32))
    ));
}
