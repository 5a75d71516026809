//! Session 59: the strides of results, as PyTorch 2.15 lays them out. Every
//! expected stride list below is a literal checked in the venv with PyTorch
//! 2.15 on the CPU (`x.stride()` after the same op on a view with the same
//! sizes, strides and offset over `torch.arange(64.)`); the replay of the
//! 500 programs of `benches/anchors/gen_strides_s59.py`
//! (`conformance/strides_s59.json.gz`, every result `"layout": "checked"`)
//! covers the same rules over more ops and layouts.
//!
//! - `clone()` and `.to(dtype)` use `torch.preserve_format`: a
//!   non-overlapping and dense input keeps its strides exactly (dims of size
//!   1 included), any other becomes dense in the order of its strides;
//!   strata's were row-major.
//! - TensorIterator's fast path: same-shape operands that are all
//!   channels-last contiguous (4-D) give a channels-last output; a Python
//!   scalar is a 0-d operand (`x + 1`, `x.lt(0)`, `where(c, x, 1.0)`) that
//!   takes the op off the same-shape path, so the output is dense in the
//!   order of the input's strides, size-1 dims included (`pow(x, 2)` is a
//!   unary op and keeps the fast path).
//! - `is_non_overlapping_and_dense` ignores dims of size 0 and 1, and a
//!   tensor without elements is dense.
//! - `expand`: a new leading dim of size 1 takes the next dim's size times
//!   its stride (0 for a 0-d tensor); `flatten(d, d)` returns the tensor.
//! - Results PyTorch allocates with `at::empty` (`bmm`, `pow(scalar, x)`)
//!   are row-major on every dim; `mse_loss(reduction='none')` is laid out by
//!   one TensorIterator over the converted operands.

use strata_tensor::{DType, Device, Layout, Reduction, Tensor};

/// A view of `size`, `stride`, `offset` over `arange(64)` in f32.
fn view(size: &[i64], stride: &[i64], offset: i64) -> Tensor {
    let base: Vec<f32> = (0..64).map(|i| i as f32).collect();
    Tensor::from_slice(&base, &[64], Device::Cpu)
        .unwrap()
        .as_strided(size, stride, Some(offset))
        .unwrap()
}

/// The layouts of the checks below: (name, size, stride, offset).
const LAYOUTS: &[(&str, &[i64], &[i64], i64)] = &[
    ("t", &[3, 4], &[1, 3], 0),
    ("perm3", &[4, 2, 3], &[1, 12, 4], 0),
    ("slice", &[3, 4], &[8, 2], 1),
    ("tslice", &[3, 4], &[1, 6], 0),
    ("expand_row", &[3, 4], &[0, 1], 0),
    ("expand_col", &[3, 4], &[1, 0], 0),
    ("size1", &[3, 1, 4], &[1, 7, 3], 0),
    ("odd1", &[1, 4], &[1, 1], 0),
    ("cl", &[4, 4, 2, 1], &[8, 1, 4, 8], 0),
    ("col", &[3, 1], &[1, 3], 0),
];

/// PyTorch's strides per layout (in `LAYOUTS` order) for `clone()` (the
/// same for `.to(torch.float64)` and `zeros_like`), `neg()`, `x + 1`,
/// `x.lt(0)`, `x.pow(2)`, `torch.where(x > 0, x, 1.)`, `torch.pow(2., x)`.
const WANT: &[[&[usize]; 7]] = &[
    [
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[4, 1],
    ],
    [
        &[1, 12, 4],
        &[1, 12, 4],
        &[1, 12, 4],
        &[1, 12, 4],
        &[1, 12, 4],
        &[1, 12, 4],
        &[6, 3, 1],
    ],
    [
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
    ],
    [
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[1, 3],
        &[4, 1],
    ],
    [
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
    ],
    [
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
        &[4, 1],
    ],
    [
        &[1, 7, 3],
        &[1, 7, 3],
        &[1, 12, 3],
        &[1, 12, 3],
        &[1, 7, 3],
        &[1, 12, 3],
        &[4, 4, 1],
    ],
    [
        &[1, 1],
        &[4, 1],
        &[1, 1],
        &[1, 1],
        &[4, 1],
        &[1, 1],
        &[4, 1],
    ],
    [
        &[8, 1, 4, 8],
        &[8, 1, 4, 4],
        &[8, 1, 4, 8],
        &[8, 1, 4, 8],
        &[8, 1, 4, 4],
        &[8, 1, 4, 8],
        &[8, 2, 1, 1],
    ],
    [
        &[1, 3],
        &[1, 1],
        &[1, 3],
        &[1, 3],
        &[1, 1],
        &[1, 3],
        &[1, 1],
    ],
];

#[test]
fn results_have_pytorchs_strides_on_every_dim() {
    let mut bad = Vec::new();
    for ((name, size, stride, offset), want) in LAYOUTS.iter().zip(WANT) {
        let x = view(size, stride, *offset);
        let pos = x.gt(0).unwrap();
        let got: [(&str, Tensor); 9] = [
            ("clone", x.deep_clone().unwrap()),
            ("neg", x.neg().unwrap()),
            ("add 1", x.add(1).unwrap()),
            ("lt 0", x.lt(0).unwrap()),
            ("pow 2", x.pow(2).unwrap()),
            ("where", Tensor::where_cond(&pos, &x, 1.0).unwrap()),
            ("scalar_pow", Tensor::scalar_pow(2.0, &x).unwrap()),
            ("to f64", x.to_dtype(DType::F64).unwrap()),
            ("zeros_like", x.zeros_like(None).unwrap()),
        ];
        for (k, (op, r)) in got.iter().enumerate() {
            // to f64 and zeros_like keep the layout as clone does.
            let w = if k < 7 { want[k] } else { want[0] };
            if r.strides() != w {
                bad.push(format!(
                    "{op} of {name}: {:?}, PyTorch's {w:?}",
                    r.strides()
                ));
            }
        }
        // The values are the op's, whatever the layout.
        let vals = x.to_vec::<f32>().unwrap();
        assert_eq!(got[0].1.to_vec::<f32>().unwrap(), vals, "clone of {name}");
        let negs: Vec<f32> = vals.iter().map(|v| -v).collect();
        assert_eq!(got[1].1.to_vec::<f32>().unwrap(), negs, "neg of {name}");
        let f64s: Vec<f64> = vals.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(got[7].1.to_vec::<f64>().unwrap(), f64s, "to f64 of {name}");
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn row_major_copies_stay_row_major() {
    let x = view(&[3, 4], &[1, 3], 0);
    assert_eq!(x.clone_contiguous().unwrap().strides(), [4, 1]);
    assert_eq!(x.to_dtype_contiguous(DType::F64).unwrap().strides(), [4, 1]);
    assert_eq!(x.contiguous().unwrap().strides(), [4, 1]);
    // The same dtype is the tensor itself, as before.
    let same = x.to_dtype_contiguous(DType::F32).unwrap();
    assert!(same.same_storage(&x) && same.strides() == [1, 3]);
    // A clone is a copy: writing it leaves the source alone.
    let c = x.deep_clone().unwrap();
    c.fill_(7).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap()[1], 3.0);
}

#[test]
fn dense_as_pytorchs_is_non_overlapping_and_dense() {
    let l = |shape: &[usize], strides: &[usize]| Layout {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        offset: 0,
    };
    // Dims of size 0 and 1 do not count; no elements is dense (PyTorch's
    // `empty_like` keeps `[0, 4]` strides `[1, 0]`, which it does only for a
    // dense layout).
    assert!(l(&[0, 4], &[100, 1]).is_dense());
    assert!(l(&[0, 4], &[1, 0]).is_dense());
    assert!(l(&[0], &[5]).is_dense());
    assert!(l(&[1, 4], &[7, 1]).is_dense());
    assert!(l(&[4, 1, 2], &[2, 99, 1]).is_dense());
    assert!(!l(&[3, 4], &[8, 2]).is_dense());
    assert!(!l(&[3, 4], &[0, 1]).is_dense());
    assert!(l(&[3, 4], &[1, 3]).is_dense());
}

#[test]
fn expand_and_flatten_strides() {
    let v = |shape: &[usize]| Tensor::zeros(shape, DType::F32, Device::Cpu).unwrap();
    // torch.zeros(3).expand(1, 1, 3).stride() == (3, 3, 1)
    assert_eq!(v(&[3]).expand(&[1, 1, 3]).unwrap().strides(), [3, 3, 1]);
    // torch.tensor(5.).expand(1, 1).stride() == (0, 0)
    assert_eq!(v(&[]).expand(&[1, 1]).unwrap().strides(), [0, 0]);
    // torch.zeros(2, 1).expand(1, 2, 2).stride() == (2, 1, 0)
    assert_eq!(v(&[2, 1]).expand(&[1, 2, 2]).unwrap().strides(), [2, 1, 0]);
    // torch.zeros(2, 1).expand(3, 1, 2, 1).stride() == (0, 2, 1, 1)
    let e = v(&[2, 1]).expand(&[3, 1, 2, 1]).unwrap();
    assert_eq!(e.strides(), [0, 2, 1, 1]);
    assert_eq!(
        v(&[2, 1]).broadcast_to(&[1, 2, 2]).unwrap().strides(),
        [2, 1, 0]
    );
    // flatten of one dim is the tensor itself: (3, 9, 1) stays.
    let x = view(&[2, 1, 3], &[3, 9, 1], 0);
    let f = x.flatten(1, 1).unwrap();
    assert_eq!(f.strides(), [3, 9, 1]);
    assert!(f.same_storage(&x));
    assert_eq!(
        view(&[1, 3], &[3, 1], 0).flatten(1, 1).unwrap().strides(),
        [3, 1]
    );
}

#[test]
fn products_and_losses() {
    // torch.bmm of [1, 3, 1] (strides (3, 1, 3)) by [1, 1, 1]: (3, 1, 1).
    let a = view(&[1, 3, 1], &[3, 1, 3], 0);
    let b = view(&[1, 1, 1], &[1, 1, 1], 2);
    let p = a.bmm(&b).unwrap();
    assert_eq!(p.strides(), [3, 1, 1]);
    assert_eq!(p.to_vec::<f32>().unwrap(), [0.0, 2.0, 4.0]);
    // F.mse_loss(x, zeros(1), reduction='none') of a bf16 [4, 1] with
    // strides (1, 4): (1, 4).
    let x = Tensor::zeros(&[1, 4], DType::BF16, Device::Cpu)
        .unwrap()
        .t()
        .unwrap();
    let y = Tensor::zeros(&[1], DType::F32, Device::Cpu).unwrap();
    let l = x.mse_loss(&y, Reduction::None, None).unwrap();
    assert_eq!((l.shape(), l.strides()), (&[4, 1][..], &[1, 4][..]));
}

#[test]
fn empty_results_keep_pytorchs_strides() {
    // PyTorch: empty_like/clone/.to of an empty tensor keep its strides;
    // its element-wise results are row-major (contiguous fast path), but
    // for a scalar operand, which orders them by the strides.
    let x = view(&[4, 0, 3], &[1, 12, 4], 0);
    assert_eq!(x.deep_clone().unwrap().strides(), [1, 12, 4]);
    assert_eq!(x.to_dtype(DType::F64).unwrap().strides(), [1, 12, 4]);
    assert_eq!(x.empty_like(None).unwrap().strides(), [1, 12, 4]);
    assert_eq!(x.neg().unwrap().strides(), [3, 3, 1]);
    assert_eq!(x.add(1).unwrap().strides(), [1, 12, 4]);
    let y = view(&[2, 0, 3], &[1, 1, 2], 0);
    assert_eq!(y.add(1).unwrap().strides(), [0, 1, 0]);
    assert_eq!(y.neg().unwrap().strides(), [3, 3, 1]);
}

#[test]
fn cat_and_stack_of_channels_last_inputs() {
    // x = torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last):
    // torch.cat([x, x], 1).stride() == (120, 1, 30, 6).
    let x = Tensor::zeros(&[2, 4, 5, 3], DType::F32, Device::Cpu)
        .unwrap()
        .permute(&[0, 3, 1, 2])
        .unwrap();
    assert_eq!(x.strides(), [60, 1, 15, 3]);
    assert_eq!(
        Tensor::cat(&[&x, &x], 1).unwrap().strides(),
        [120, 1, 30, 6]
    );
    // A row-major input beside it gives a row-major result.
    let r = Tensor::zeros(&[2, 3, 4, 5], DType::F32, Device::Cpu).unwrap();
    assert_eq!(
        Tensor::cat(&[&x, &r], 1).unwrap().strides(),
        [120, 20, 5, 1]
    );
    // torch.stack of two [2, 3, 2, 2] channels-last tensors along dim 1:
    // (24, 3, 1, 12, 6) (PyTorch's cat along dim 1, then a view).
    let y = view(&[2, 3, 2, 2], &[12, 1, 6, 3], 0);
    let s = Tensor::stack(&[&y, &y], 1).unwrap();
    assert_eq!(s.shape(), [2, 2, 3, 2, 2]);
    assert_eq!(s.strides(), [24, 3, 1, 12, 6]);
    assert_eq!(
        s.select(1, 1).unwrap().to_vec::<f32>().unwrap(),
        y.to_vec::<f32>().unwrap()
    );
}

/// Round 2 (5-D, `torch.channels_last_3d`). Literals from PyTorch 2.15 in
/// the venv over `b = torch.arange(64.)`: `cl5 = b.as_strided([2, 3, 2, 2, 2],
/// [24, 1, 12, 6, 3])`, `rm5` the row-major `[2, 3, 2, 2, 2]`,
/// `cl5n1 = b.as_strided([1, 3, 2, 2, 2], [24, 1, 12, 6, 3])`,
/// `cl5s = b.as_strided([2, 3, 1, 2, 2], [12, 1, 99, 6, 3])` (its size-1 dim's
/// stride breaks `is_channels_last_strides_3d`). `conformance/strides_s59b.json.gz`
/// (`gen_strides_s59.py --part 2`) covers these and more.
#[test]
fn channels_last_3d_results() {
    let cl5 = view(&[2, 3, 2, 2, 2], &[24, 1, 12, 6, 3], 0);
    let rm5 = view(&[2, 3, 2, 2, 2], &[24, 8, 4, 2, 1], 0);
    let cl5n1 = view(&[1, 3, 2, 2, 2], &[24, 1, 12, 6, 3], 0);
    let cl5s = view(&[2, 3, 1, 2, 2], &[12, 1, 99, 6, 3], 0);
    let cat = |a: &Tensor, b: &Tensor, d: i64| Tensor::cat(&[a, b], d).unwrap();
    // torch.cat([cl5, cl5], 1), ([cl5, cl5], 0), ([cl5, rm5], 1),
    // ([cl5n1, cl5n1], 0), ([cl5s, cl5s], 2).
    assert_eq!(cat(&cl5, &cl5, 1).strides(), [48, 1, 24, 12, 6]);
    assert_eq!(cat(&cl5, &cl5, 0).strides(), [24, 1, 12, 6, 3]);
    assert_eq!(cat(&cl5, &rm5, 1).strides(), [48, 8, 4, 2, 1]);
    assert_eq!(cat(&cl5n1, &cl5n1, 0).strides(), [24, 1, 12, 6, 3]);
    assert_eq!(cat(&cl5s, &cl5s, 2).strides(), [24, 8, 4, 2, 1]);
    let joined = cat(&cl5, &rm5, 0);
    assert_eq!(
        joined.narrow(0, 0, 2).unwrap().to_vec::<f32>().unwrap(),
        cl5.to_vec::<f32>().unwrap()
    );
    // torch.stack([cl5, cl5], 1), ([cl5, cl5], -1), ([cl5, rm5], 1).
    let stack = |a: &Tensor, b: &Tensor, d: i64| Tensor::stack(&[a, b], d).unwrap();
    assert_eq!(stack(&cl5, &cl5, 1).strides(), [48, 3, 1, 24, 12, 6]);
    assert_eq!(stack(&cl5, &cl5, -1).strides(), [48, 16, 8, 4, 2, 1]);
    assert_eq!(stack(&cl5, &rm5, 1).strides(), [48, 24, 8, 4, 2, 1]);
    // cl5 + cl5, cl5 + rm5, rm5 + cl5, cl5s + cl5s.
    assert_eq!(cl5.add(&cl5).unwrap().strides(), [24, 1, 12, 6, 3]);
    assert_eq!(cl5.add(&rm5).unwrap().strides(), [24, 1, 12, 6, 3]);
    assert_eq!(rm5.add(&cl5).unwrap().strides(), [24, 8, 4, 2, 1]);
    assert_eq!(cl5s.add(&cl5s).unwrap().strides(), [12, 1, 99, 6, 3]);
    // torch.empty(96).as_strided([2, 3, 2, 2, 2], [48, 2, 24, 12, 6]).clone(),
    // zeros_like(cl5), cl5.to(torch.float64).
    let gapped = Tensor::zeros(&[96], DType::F32, Device::Cpu)
        .unwrap()
        .as_strided(&[2, 3, 2, 2, 2], &[48, 2, 24, 12, 6], Some(0))
        .unwrap();
    assert_eq!(gapped.deep_clone().unwrap().strides(), [24, 1, 12, 6, 3]);
    assert_eq!(cl5.zeros_like(None).unwrap().strides(), [24, 1, 12, 6, 3]);
    assert_eq!(
        cl5.to_dtype(DType::F64).unwrap().strides(),
        [24, 1, 12, 6, 3]
    );
}

/// `torch.linalg.vector_norm` writes into the row-major result its meta
/// function allocates, also over dims of size 1, where it is `|x|`
/// (PyTorch 2.15: `y = b.as_strided([3, 1, 4], [1, 7, 3])`;
/// `vector_norm(y, 2, 1).stride() == (4, 1)`, with keepdim `(4, 4, 1)`,
/// while `y.abs().stride() == (1, 7, 3)`).
#[test]
fn vector_norm_is_row_major() {
    let y = view(&[3, 1, 4], &[1, 7, 3], 0);
    assert_eq!(y.abs().unwrap().strides(), [1, 7, 3]);
    for (p, keep) in [
        (2.0, false),
        (2.0, true),
        (f64::INFINITY, false),
        (0.0, true),
    ] {
        let n = y.vector_norm(p, Some(&[1]), keep).unwrap();
        let want: &[usize] = if keep { &[4, 4, 1] } else { &[4, 1] };
        assert_eq!(n.strides(), want, "p {p} keepdim {keep}");
        let abs = y.abs().unwrap().to_vec::<f32>().unwrap();
        let exp: Vec<f32> = if p == 0.0 {
            abs.iter().map(|&a| f32::from(u8::from(a != 0.0))).collect()
        } else {
            abs
        };
        assert_eq!(n.to_vec::<f32>().unwrap(), exp);
    }
}
