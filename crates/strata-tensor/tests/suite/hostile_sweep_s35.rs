//! Session 35's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s33.rs`): in-place `masked_scatter_` reading memory it
//! writes, float-to-integer conversion of NaN, infinities and out-of-range
//! values, empty shapes with huge sizes, `chunk` counts near `i64::MAX`, and
//! a sweep of `as_strided` layouts, out-of-range and empty indices, NaN in
//! scans and arg-reductions, reductions over empty dims, matmul with zero
//! dims and safetensors round trips of odd tensors. Each assertion states
//! what PyTorch 2.15 (CPU, x86) gives for the same call, checked there and
//! noted beside it.
//!
//! Defects these tests found (fixed with them):
//!
//! * `masked_scatter_` with a source that shares self's memory (`x` itself,
//!   `x[1:]`) returned the out-of-place answer, which is neither PyTorch's
//!   (its serial CPU loop reads source elements it has already overwritten:
//!   `[0, 0, 0, 3, 0, 3]` where strata gave `[0, 0, 1, 3, 2, 3]`) nor
//!   refused. PyTorch's answer is an artefact of its loop order that no
//!   parallel kernel (its CUDA one, strata's) reproduces, so strata now
//!   refuses such a source, and a mask that shares part of self, with
//!   [`TensorError::Overlap`] (clone first), leaving self unchanged.
//! * Float-to-integer conversion saturated (Rust's `f as i64 as T`: NaN 0,
//!   inf to int32 -1, 1e30 to int64 `i64::MAX`); PyTorch's x86 CPU kernels
//!   give the "integer indefinite" `INT_MIN` for NaN and for anything out of
//!   range (int32 via a 32-bit conversion, int64 and uint8 via a 64-bit one,
//!   uint8 keeping the low byte), deterministically for contiguous and
//!   strided inputs of every float dtype. strata now gives those values
//!   (`to_dtype`, `copy_`, and every other use of the element conversion).
//!
//! Examined and already PyTorch's (no change):
//!
//! * `zeros([2^62, 0])`, `empty([i64::MAX, 0])`, `empty([0, i64::MAX])` are
//!   accepted (numel 0); `[2^62, 4, 0]` is refused by both. One difference
//!   is kept: PyTorch accepts `[2^62, 2, 0]` (its running product 2^63 still
//!   fits the u64 it multiplies in, and only the trailing sizes make
//!   strides), strata refuses it because it requires every contiguous
//!   shape's sizes (each at least 1) to multiply within `i64::MAX`, an
//!   invariant the kernels' index arithmetic relies on; the u64 band PyTorch
//!   accepts is an artefact of the integer type it happens to check in.
//! * `chunk(i64::MAX)`: PyTorch computes `(n + chunks - 1) / chunks`, which
//!   overflows, and fails ("split_size can only be 0 if dimension size is
//!   0"); `chunk(2^62)` of the same tensor gives n pieces of 1. strata
//!   computes the ceiling without the overflow and gives that answer for
//!   every count; on an empty dim (where PyTorch tries to allocate i64::MAX
//!   tensors) it is a typed value error.
//! * `var`/`std` with a NaN correction: PyTorch gives inf
//!   (`max(0, n - nan)` is 0 in its C++, so it divides by zero); strata's
//!   typed value error (asking for a number) is kept, that inf being an
//!   artefact of a NaN comparison.
//!
//! * An in-place op whose input is an expanded (stride-0) view of self:
//!   `x = arange(1., 5.); x.div_(x[1:2].expand(4), rounding_mode='floor')`
//!   is `[0, 1, 3, 4]` in PyTorch, whose overlap check cannot compare such a
//!   layout and whose loop then reads x[1] after overwriting it; strata
//!   reads a copy of such an input (`check_inplace`) and gives
//!   `[0, 1, 1, 2]`. Kept: PyTorch's answer is its loop order's.
//!
//! Everything else here already gave PyTorch's answer.

use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn t<T: strata_tensor::Element>(v: &[T]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.contiguous().unwrap().to_vec::<f32>().unwrap()
}

fn f64s(x: &Tensor) -> Vec<f64> {
    x.to_vec_as::<f64>().unwrap()
}

fn zeros(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, CPU).unwrap()
}

// ----------------------------------------------------- masked_scatter_ aliasing

#[test]
fn masked_scatter_inplace_refuses_a_source_that_shares_self() {
    // PyTorch 2.15 (CPU) does not refuse this: its serial loop reads the
    // source after writing through it, so
    // `x = arange(6.); x.masked_scatter_(m, x)` with
    // m = [F, T, T, F, T, T] gives [0, 0, 0, 3, 0, 3], and with
    // `x[1:]` as the source [0, 1, 2, 3, 3, 3]: answers of that loop's order
    // that no parallel kernel (PyTorch's CUDA one or strata's) reproduces.
    // strata refuses, as PyTorch's own overlap check does for other in-place
    // ops ("some elements of the input tensor and the written-to tensor refer
    // to a single memory location"), and self is left as it was.
    let m = t(&[false, true, true, false, true, true]);
    let x = t(&[0f32, 1., 2., 3., 4., 5.]);
    let v0 = x.version();
    for source in [
        x.clone(),
        x.narrow(0, 1, 5).unwrap(),
        x.narrow(0, 2, 4).unwrap(),
        x.reshape(&[2, 3]).unwrap(),
    ] {
        match x.masked_scatter_(&m, &source) {
            Err(TensorError::Overlap { op, msg }) => {
                assert_eq!(op, "masked_scatter_");
                assert!(msg.contains("clone"), "{msg}");
            }
            other => panic!("expected an overlap error, got {other:?}"),
        }
    }
    assert_eq!(f32s(&x), [0., 1., 2., 3., 4., 5.]);
    assert_eq!(x.version(), v0);
    // A mask that is part of self (a bool self) is refused the same way.
    let b = t(&[true, false, true, true]);
    let r = b
        .narrow(0, 1, 3)
        .unwrap()
        .masked_scatter_(&b.narrow(0, 0, 3).unwrap(), &t(&[false; 3]));
    assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    assert_eq!(b.to_vec::<bool>().unwrap(), [true, false, true, true]);
    // What PyTorch allows and answers without an order artefact still
    // works: a disjoint source in the same storage
    // (x[:3].masked_scatter_(m[:3], x[3:]) is [0, 3, 4, 3, 4, 5]), a cloned
    // source (x.masked_scatter_(m, x.clone()) is [0, 0, 1, 3, 2, 3]) and the
    // mask being self (b.masked_scatter_(b, [F, F]) with b = [T, F, T] is
    // [F, F, F]).
    let x = t(&[0f32, 1., 2., 3., 4., 5.]);
    x.narrow(0, 0, 3)
        .unwrap()
        .masked_scatter_(&m.narrow(0, 0, 3).unwrap(), &x.narrow(0, 3, 3).unwrap())
        .unwrap();
    assert_eq!(f32s(&x), [0., 3., 4., 3., 4., 5.]);
    let x = t(&[0f32, 1., 2., 3., 4., 5.]);
    x.masked_scatter_(&m, &x.deep_clone().unwrap()).unwrap();
    assert_eq!(f32s(&x), [0., 0., 1., 3., 2., 3.]);
    let b = t(&[true, false, true]);
    b.masked_scatter_(&b, &t(&[false, false])).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), [false, false, false]);
}

// -------------------------------------------------- float to integer conversion

#[test]
fn float_to_integer_conversion_gives_pytorchs_x86_values() {
    // torch.tensor([nan, inf, -inf, 1e30, -1e30, 300., -300., 3e9, -3e9,
    // 70000., -70000., 2.5, -2.5, 255.9, -0.9, 1e19, -1e19]).to(dtype),
    // PyTorch 2.15 CPU (x86; the same for float64, float16 and bfloat16
    // inputs holding these values, and for strided inputs): NaN and values
    // outside the target's conversion range become the x86 "integer
    // indefinite" INT_MIN (int32 and int64), uint8 takes the low byte of the
    // int64 conversion.
    let v = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        300.,
        -300.,
        3e9,
        -3e9,
        70000.,
        -70000.,
        2.5,
        -2.5,
        255.9,
        -0.9,
        1e19,
        -1e19,
    ];
    const I32MIN: i32 = i32::MIN;
    const I64MIN: i64 = i64::MIN;
    let want_i32 = [
        I32MIN, I32MIN, I32MIN, I32MIN, I32MIN, 300, -300, I32MIN, I32MIN, 70000, -70000, 2, -2,
        255, 0, I32MIN, I32MIN,
    ];
    let want_i64 = [
        I64MIN,
        I64MIN,
        I64MIN,
        I64MIN,
        I64MIN,
        300,
        -300,
        3_000_000_000,
        -3_000_000_000,
        70000,
        -70000,
        2,
        -2,
        255,
        0,
        I64MIN,
        I64MIN,
    ];
    let want_u8: [u8; 17] = [0, 0, 0, 0, 0, 44, 212, 0, 0, 112, 144, 2, 254, 255, 0, 0, 0];
    let x = t(&v);
    let xd = x.to_dtype(DType::F64).unwrap();
    // Every other element, through a strided view.
    let strided = |w: &[i64]| w.iter().step_by(2).copied().collect::<Vec<_>>();
    for src in [&x, &xd] {
        assert_eq!(
            src.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
            want_i32
        );
        assert_eq!(
            src.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
            want_i64
        );
        assert_eq!(
            src.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap(),
            want_u8
        );
        let s = src.slice(0, None, None, 2).unwrap();
        let got = s.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap();
        assert_eq!(got, strided(&want_i64));
        // copy_ into an integer tensor converts the same way.
        let out = Tensor::zeros(&[17], DType::I32, CPU).unwrap();
        out.copy_(src).unwrap();
        assert_eq!(out.to_vec::<i32>().unwrap(), want_i32);
    }
    // f64 values the f32 ones cannot hold:
    // torch.tensor([3000000001., -2.**40 + 7, 2.**31 + 3, -2.**31 - 3,
    // 2.**63, -2.**63, -2147483648.5], dtype=torch.float64) to int32 is
    // -2147483648 seven times (the last one in range), to int64
    // [3000000001, -1099511627769, 2147483651, -2147483651, INT64_MIN,
    // INT64_MIN, -2147483648] and to uint8 [1, 7, 3, 253, 0, 0, 0].
    let d = t(&[
        3_000_000_001f64,
        -(2f64.powi(40)) + 7.,
        2f64.powi(31) + 3.,
        -(2f64.powi(31)) - 3.,
        2f64.powi(63),
        -(2f64.powi(63)),
        -2147483648.5,
    ]);
    assert_eq!(
        d.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [I32MIN; 7]
    );
    assert_eq!(
        d.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        [
            3_000_000_001,
            -1_099_511_627_769,
            2_147_483_651,
            -2_147_483_651,
            I64MIN,
            I64MIN,
            -2_147_483_648
        ]
    );
    assert_eq!(
        d.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap(),
        [1, 7, 3, 253, 0, 0, 0]
    );
    // Half inputs: torch.tensor([nan, inf, 70000.]).half() is [nan, inf,
    // inf]; .to(int32) is INT_MIN for all three, .to(uint8) 0.
    let h = t(&[f32::NAN, f32::INFINITY, 70000.])
        .to_dtype(DType::F16)
        .unwrap();
    assert_eq!(
        h.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [I32MIN; 3]
    );
    assert_eq!(
        h.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap(),
        [0; 3]
    );
    // bool is `!= 0`: NaN and inf are True.
    assert_eq!(
        x.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap(),
        [true; 17]
    );
}

// ------------------------------------------------------ huge empty shapes

#[test]
fn empty_shapes_with_huge_sizes_are_accepted_as_in_pytorch() {
    let max = i64::MAX as usize;
    // torch.zeros([2**62, 0]) and torch.full([2**62, 0], 3.): shape
    // (2^62, 0), strides (1, 1).
    for x in [
        zeros(&[1 << 62, 0]),
        Tensor::full(&[1 << 62, 0], 3.0, DType::F32, CPU).unwrap(),
    ] {
        assert_eq!(x.shape(), &[1 << 62, 0]);
        assert_eq!(x.numel(), 0);
        // .sum(0) is a (0,) tensor, .t().contiguous() a (0, 2^62) one,
        // .reshape(-1) a (0,) one.
        assert_eq!(x.sum(Some(&[0]), false).unwrap().shape(), &[0]);
        assert_eq!(x.t().unwrap().contiguous().unwrap().shape(), &[0, 1 << 62]);
        assert_eq!(x.reshape(&[-1]).unwrap().shape(), &[0]);
    }
    // torch.empty([2**63 - 1, 0]) and torch.empty([0, 2**63 - 1]) (strides
    // (2^63 - 1, 1)).
    let e = Tensor::empty(&[max, 0], DType::F32, CPU).unwrap();
    assert_eq!(e.shape(), &[max, 0]);
    let e = Tensor::empty(&[0, max], DType::F32, CPU).unwrap();
    assert_eq!((e.shape(), e.strides()), (&[0, max][..], &[max, 1][..]));
    // torch.empty([2**62, 4, 0]): "Storage size calculation overflowed".
    for shape in [[1 << 62, 4, 0], [max, max, 0]] {
        match Tensor::empty(&shape, DType::F32, CPU) {
            Err(TensorError::SizeOverflow { op, msg }) => {
                assert_eq!(op, "empty");
                assert!(msg.contains(&format!("{shape:?}")), "{msg}");
            }
            other => panic!("expected a size error, got {other:?}"),
        }
    }
}

// ------------------------------------------------------------------ chunk

#[test]
fn chunk_with_a_count_near_i64_max_does_not_overflow() {
    let x = t(&[0f32, 1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    // torch.arange(10.).chunk(2**62) (and chunk(11)): ten pieces of 1.
    // chunk(2**63 - 1) fails in PyTorch 2.15 only because (10 + chunks - 1)
    // wraps; strata gives the answer of every count that does not wrap.
    for chunks in [11, 1 << 62, i64::MAX - 9, i64::MAX] {
        let pieces = x.chunk(chunks, 0).unwrap();
        assert_eq!(pieces.len(), 10, "chunks {chunks}");
        assert!(pieces.iter().all(|p| p.shape() == [1]));
        assert_eq!(f32s(&pieces[9]), [9.0]);
    }
    // torch.zeros(0).chunk(3) is three (0,) tensors; chunk(2**63 - 1) asks
    // for i64::MAX of them ("cannot create std::vector larger than
    // max_size()"): a typed error here, naming the count.
    assert_eq!(t::<f32>(&[]).chunk(3, 0).unwrap().len(), 3);
    match t::<f32>(&[]).chunk(i64::MAX, 0) {
        Err(TensorError::Value { op, msg }) => {
            assert_eq!(op, "chunk");
            assert!(msg.contains(&i64::MAX.to_string()), "{msg}");
        }
        other => panic!("expected a value error, got {other:?}"),
    }
}

// ------------------------------------------------------------- as_strided

#[test]
fn as_strided_refuses_what_pytorch_refuses() {
    let x = t(&[0f32, 1., 2., 3., 4., 5.]);
    // "as_strided: Negative strides are not supported", "invalid storage
    // offset -1".
    for (size, stride, off) in [([2], [-1], 3), ([2], [1], -1)] {
        let r = x.as_strided(&size, &stride, Some(off));
        assert!(matches!(r, Err(TensorError::Value { .. })), "{r:?}");
    }
    // Past the end ("requiring a storage size of 28 are out of bounds for
    // storage of size 24"), and a huge stride ("Storage size calculation
    // overflowed with sizes=[2] and strides=[4611686018427387904]").
    for (stride, off) in [(1, 5), (1 << 62, 0), (i64::MAX, 0)] {
        let r = x.as_strided(&[2], &[stride], Some(off));
        assert!(
            matches!(
                r,
                Err(TensorError::OutOfBounds { .. }) | Err(TensorError::SizeOverflow { .. })
            ),
            "stride {stride} offset {off}: {r:?}"
        );
    }
    // What PyTorch allows: size 0 anywhere (x.as_strided((0,), (1,), 100)
    // and ((0,), (2**62,), 0) are empty) and a huge stride on a size-1 dim
    // (x.as_strided((1,), (2**62,), 0) is [0.]).
    assert_eq!(x.as_strided(&[0], &[1], Some(100)).unwrap().numel(), 0);
    assert_eq!(x.as_strided(&[0], &[1 << 62], Some(0)).unwrap().numel(), 0);
    assert_eq!(
        f32s(&x.as_strided(&[1], &[1 << 62], Some(0)).unwrap()),
        [0.0]
    );
}

// ------------------------------------------------------------ index ops

#[test]
fn index_ops_refuse_out_of_range_and_negative_indices() {
    let x = t(&[0f32, 1., 2., 3., 4., 5.]);
    let i = |v: &[i64]| t(v);
    // x.index_select(0, tensor([6])) and ([-1]): "index out of range in
    // self"; x.gather(0, tensor([-1])): "index -1 is out of bounds for
    // dimension 0 with size 6"; zeros(3).scatter_add(0, tensor([3]), ...)
    // likewise. strata never wraps a negative index here either.
    for idx in [[6], [-1], [i64::MIN]] {
        let r = x.index_select(0, &i(&idx));
        assert!(
            matches!(r, Err(TensorError::Index { .. })),
            "{idx:?}: {r:?}"
        );
        let r = x.gather(0, &i(&idx));
        assert!(
            matches!(r, Err(TensorError::Index { .. })),
            "{idx:?}: {r:?}"
        );
        let z = zeros(&[6]);
        let r = z.scatter_add(0, &i(&idx), &t(&[1f32]));
        assert!(
            matches!(r, Err(TensorError::Index { .. })),
            "{idx:?}: {r:?}"
        );
        assert_eq!(f32s(&z), [0.0; 6]);
    }
    // torch.zeros(0).index_select(0, tensor([0])): out of range.
    let r = t::<f32>(&[]).index_select(0, &i(&[0]));
    assert!(matches!(r, Err(TensorError::Index { .. })), "{r:?}");
    // Empty indices give empty results (tensor([])), a 0-d index a (1,)
    // result (x.index_select(0, tensor(2)) is tensor([2.])), a 2-d one is
    // refused ("Index is supposed to be a vector").
    assert_eq!(x.index_select(0, &i(&[])).unwrap().shape(), &[0]);
    assert_eq!(x.gather(0, &i(&[])).unwrap().shape(), &[0]);
    let zero_d = Tensor::from_slice(&[2i64], &[], CPU).unwrap();
    assert_eq!(f32s(&x.index_select(0, &zero_d).unwrap()), [2.0]);
    let two_d = Tensor::from_slice(&[0i64, 1], &[1, 2], CPU).unwrap();
    assert!(x.index_select(0, &two_d).is_err());
    // zeros(3).scatter_add(0, tensor([0, 0]), tensor([1.])): the index may
    // not be larger than src.
    assert!(matches!(
        zeros(&[3]).scatter_add(0, &i(&[0, 0]), &t(&[1f32])),
        Err(TensorError::Shape { .. })
    ));
}

// ----------------------------------------------- NaN, empty dims, matmul

#[test]
fn nan_and_empty_reductions_and_zero_dim_matmuls_match_pytorch() {
    let n = t(&[3f32, f32::NAN, 1., 2.]);
    // tensor([3., nan, 1., 2.]).cumsum(0) is [3, nan, nan, nan]; argmax()
    // is 1 and max(0) is (nan, 1): the NaN wins.
    let c = f64s(&n.cumsum(0, None).unwrap());
    assert_eq!(c[0], 3.0);
    assert!(c[1..].iter().all(|v| v.is_nan()), "{c:?}");
    assert_eq!(f64s(&n.argmax(None, false).unwrap()), [1.0]);
    let (v, i) = n.max_dim(0, false).unwrap();
    assert!(f64s(&v)[0].is_nan());
    assert_eq!(f64s(&i), [1.0]);

    let e = zeros(&[0, 3]);
    // zeros(0, 3): sum(0) [0, 0, 0], mean(0) and var(0) [nan] * 3,
    // logsumexp(0) [-inf] * 3; max(1) gives empty results; max(0),
    // argmax(0) and max() are errors ("Expected reduction dim 0 to have
    // non-zero size").
    assert_eq!(f64s(&e.sum(Some(&[0]), false).unwrap()), [0.0; 3]);
    assert!(f64s(&e.mean(Some(&[0]), false).unwrap())
        .iter()
        .all(|v| v.is_nan()));
    assert!(f64s(&e.var(Some(&[0]), 1.0, false).unwrap())
        .iter()
        .all(|v| v.is_nan()));
    assert_eq!(
        f64s(&e.logsumexp(&[0], false).unwrap()),
        [f64::NEG_INFINITY; 3]
    );
    assert_eq!(e.max_dim(1, false).unwrap().0.shape(), &[0]);
    assert!(matches!(
        e.max_dim(0, false),
        Err(TensorError::Empty { .. })
    ));
    assert!(matches!(
        e.argmax(Some(0), false),
        Err(TensorError::Empty { .. })
    ));
    assert!(matches!(e.max(), Err(TensorError::Empty { .. })));

    // zeros(2, 0) @ zeros(0, 3) is zeros(2, 3); zeros(0) @ zeros(0) is
    // tensor(0.); zeros(0) @ zeros(0, 3) is [0, 0, 0]; zeros(3, 0, 2).bmm(
    // zeros(3, 2, 4)) is (3, 0, 4).
    assert_eq!(f64s(&zeros(&[2, 0]).mm(&zeros(&[0, 3])).unwrap()), [0.0; 6]);
    let d = zeros(&[0]).matmul(&zeros(&[0])).unwrap();
    assert_eq!((d.shape(), f64s(&d)), (&[][..], vec![0.0]));
    assert_eq!(
        f64s(&zeros(&[0]).matmul(&zeros(&[0, 3])).unwrap()),
        [0.0; 3]
    );
    assert_eq!(
        zeros(&[3, 0, 2]).bmm(&zeros(&[3, 2, 4])).unwrap().shape(),
        &[3, 0, 4]
    );
    // uint8 matmul wraps: ones(2, 3, uint8) @ full((3, 2), 100, uint8) is
    // 44 everywhere; bool is "not implemented", mixed dtypes "expected m1
    // and m2 to have the same dtype".
    let a = Tensor::ones(&[2, 3], DType::U8, CPU).unwrap();
    let b = Tensor::full(&[3, 2], 100, DType::U8, CPU).unwrap();
    assert_eq!(a.mm(&b).unwrap().to_vec::<u8>().unwrap(), [44; 4]);
    let bo = Tensor::ones(&[2, 2], DType::Bool, CPU).unwrap();
    assert!(matches!(bo.mm(&bo), Err(TensorError::DType { .. })));
    let f = Tensor::ones(&[2, 2], DType::F64, CPU).unwrap();
    assert!(matches!(
        zeros(&[2, 2]).mm(&f),
        Err(TensorError::DType { .. })
    ));
}

// ------------------------------------------------------------ safetensors

#[test]
fn safetensors_round_trips_odd_tensors() {
    use strata_tensor::{safetensors_from_bytes, safetensors_to_bytes};
    let base = t(&[1f32, 2., 3., 4., 5., 6.]).reshape(&[2, 3]).unwrap();
    let tensors = [
        ("scalar", Tensor::from_slice(&[7.5f64], &[], CPU).unwrap()),
        ("empty", zeros(&[0, 3])),
        ("transposed", base.t().unwrap()),
        (
            "expanded",
            t(&[1i64, 2]).unsqueeze(0).unwrap().expand(&[3, 2]).unwrap(),
        ),
        ("strided", base.slice(1, None, None, 2).unwrap()),
        ("bools", t(&[true, false, true])),
        (
            "halves",
            t(&[f32::NAN, -0.0, 65504.]).to_dtype(DType::F16).unwrap(),
        ),
    ];
    let bytes = safetensors_to_bytes(tensors.iter().map(|(n, x)| (*n, x))).unwrap();
    let back = safetensors_from_bytes(&bytes, CPU).unwrap();
    assert_eq!(back.len(), tensors.len());
    for (name, x) in &tensors {
        let y = &back[*name];
        assert_eq!((y.shape(), y.dtype()), (x.shape(), x.dtype()), "{name}");
        assert!(y.is_contiguous(), "{name}");
        let (a, b) = (f64s(&x.contiguous().unwrap()), f64s(y));
        let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same && a.len() == b.len(), "{name}: {a:?} vs {b:?}");
    }
    // A truncated file is a typed error, never a panic.
    for cut in [0, 7, 8, bytes.len() / 2, bytes.len() - 1] {
        let r = safetensors_from_bytes(&bytes[..cut], CPU);
        assert!(r.is_err(), "cut at {cut}");
    }
}

// ------------------------------------ promotion, accumulation and diagonals

#[test]
fn promotion_and_extreme_arguments_match_pytorch() {
    use strata_tensor::Scalar;
    let zero_d = |v: f64, dtype: DType| Tensor::scalar(v, dtype, CPU).unwrap();
    // int32 tensor + 0-d float64 tensor is float64 ([3.5, 4.5]); + 0-d int64
    // 2**40 stays int32 and wraps ([1, 2]); uint8 + 0-d int64 -1 wraps to
    // [0, 1]; bool + 0-d int64 2 is int64 [3]; float16 + bfloat16 is float32.
    let i32t = t(&[1i32, 2]);
    let y = i32t.add(&zero_d(2.5, DType::F64)).unwrap();
    assert_eq!((y.dtype(), f64s(&y)), (DType::F64, vec![3.5, 4.5]));
    let y = i32t
        .add(&Tensor::from_slice(&[1i64 << 40], &[], CPU).unwrap())
        .unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), [1, 2]);
    let y = t(&[1u8, 2]).add(&zero_d(-1.0, DType::I64)).unwrap();
    assert_eq!(y.to_vec::<u8>().unwrap(), [0, 1]);
    let y = t(&[true]).add(&zero_d(2.0, DType::I64)).unwrap();
    assert_eq!(y.to_vec::<i64>().unwrap(), [3]);
    let h = t(&[1f32]).to_dtype(DType::F16).unwrap();
    let b = t(&[1f32]).to_dtype(DType::BF16).unwrap();
    assert_eq!(h.add(&b).unwrap().dtype(), DType::F32);
    // Sums and cumsums of uint8/bool/int32 accumulate in int64.
    assert_eq!(
        t(&[200u8, 100])
            .sum(None, false)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [300]
    );
    assert_eq!(
        t(&[true, true])
            .cumsum(0, None)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [1, 2]
    );
    // Variance with a correction past the count is inf
    // (tensor([1., 2.]).var(correction=5)), with a negative one
    // 0.25 * 2 / 3 = 0.16666667.
    assert_eq!(
        f64s(&t(&[1f32, 2.]).var(None, 5.0, false).unwrap()),
        [f64::INFINITY]
    );
    let v = f64s(&t(&[1f32, 2.]).var(None, -1.0, false).unwrap())[0];
    assert!((v - 0.16666667).abs() < 1e-7, "{v}");
    // clamp(3, 2) gives 2 everywhere; an int64 tensor clamped at 2.5 is
    // float32 [2.5, 5.]; a uint8 clamped at -1 is unchanged.
    let c = t(&[1f32, 5.])
        .clamp(Some(Scalar::Int(3)), Some(Scalar::Int(2)))
        .unwrap();
    assert_eq!(f32s(&c), [2.0, 2.0]);
    let c = t(&[1i64, 5])
        .clamp(Some(Scalar::Float(2.5)), None::<Scalar>)
        .unwrap();
    assert_eq!((c.dtype(), f32s(&c)), (DType::F32, vec![2.5, 5.0]));
    let c = t(&[1u8, 5])
        .clamp(Some(Scalar::Int(-1)), None::<Scalar>)
        .unwrap();
    assert_eq!(c.to_vec::<u8>().unwrap(), [1, 5]);
    // triu/tril at the ends of i64: arange(6.).reshape(2, 3).triu(-2**63)
    // and .tril(2**63 - 1) keep everything, .triu(2**63 - 1) and
    // .tril(-2**63) keep nothing; no diagonal arithmetic wraps.
    let m = t(&[0f32, 1., 2., 3., 4., 5.]).reshape(&[2, 3]).unwrap();
    let all = [0f32, 1., 2., 3., 4., 5.];
    assert_eq!(f32s(&m.triu(i64::MIN).unwrap()), all);
    assert_eq!(f32s(&m.tril(i64::MAX).unwrap()), all);
    assert_eq!(f32s(&m.triu(i64::MAX).unwrap()), [0.0; 6]);
    assert_eq!(f32s(&m.tril(i64::MIN).unwrap()), [0.0; 6]);
    // softmax of an all -inf row is NaN; logsumexp of [inf, 1] inf, of
    // [-inf, -inf] -inf, of [nan, inf] nan.
    let s = f64s(&t(&[f32::NEG_INFINITY; 2]).softmax(0, None).unwrap());
    assert!(s.iter().all(|v| v.is_nan()), "{s:?}");
    let lse = |v: &[f32]| f64s(&t(v).logsumexp(&[0], false).unwrap())[0];
    assert_eq!(lse(&[f32::INFINITY, 1.0]), f64::INFINITY);
    assert_eq!(lse(&[f32::NEG_INFINITY; 2]), f64::NEG_INFINITY);
    assert!(lse(&[f32::NAN, f32::INFINITY]).is_nan());
}

#[test]
fn other_inplace_ops_reading_self_match_pytorch() {
    use strata_tensor::RoundingMode;
    let m = t(&[true, true, false, true]);
    let x4 = || t(&[0f32, 1., 2., 3.]);
    // x = arange(4.); x.masked_fill_(m, x[2]) is [2, 2, 2, 2] and with x[0]
    // [0, 0, 2, 0]: the 0-d value is read once, before the fill.
    let x = x4();
    x.masked_fill_(&m, &x.select(0, 2).unwrap()).unwrap();
    assert_eq!(f32s(&x), [2.0; 4]);
    let x = x4();
    x.masked_fill_(&m, &x.select(0, 0).unwrap()).unwrap();
    assert_eq!(f32s(&x), [0.0, 0.0, 2.0, 0.0]);
    // x.addcmul_(x, x, value=2) is [0, 3, 10, 21]; x[:3].addcmul_(x[1:],
    // x[1:]), x.div_(x[0], rounding_mode='floor') and
    // zeros(4).scatter_add_(0, [0, 1], x[2:]) are PyTorch's "some elements
    // of the input tensor and the written-to tensor refer to a single memory
    // location"; each leaves x as it was.
    let x = x4();
    x.addcmul_(&x, &x, 2.0).unwrap();
    assert_eq!(f32s(&x), [0.0, 3.0, 10.0, 21.0]);
    let x = x4();
    let tail = x.narrow(0, 1, 3).unwrap();
    let r = x.narrow(0, 0, 3).unwrap().addcmul_(&tail, &tail, 1.0);
    assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    let r = x.div_mode_(&x.select(0, 0).unwrap(), RoundingMode::Floor);
    assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    assert_eq!(f32s(&x), [0.0, 1.0, 2.0, 3.0]);
    let z = t(&[5f32, 6., 7., 8.]);
    let r = z.scatter_add_(0, &t(&[0i64, 1]), &z.narrow(0, 2, 2).unwrap());
    assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    assert_eq!(f32s(&z), [5.0, 6.0, 7.0, 8.0]);
}
