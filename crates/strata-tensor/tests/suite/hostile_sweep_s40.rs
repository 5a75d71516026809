//! Session 40's sweep of hostile inputs to strata-tensor: `Display` of
//! values at the edges of PyTorch's formatting rules (huge, tiny, mixed
//! magnitudes, zeros, NaN and infinities, rows longer than a line), NCCL
//! world sizes past a C int, and `split` into more sections than it
//! returns. Each expected string is `repr(t)` of the same tensor in PyTorch
//! 2.15 (CPU), with the Python beside it.
//!
//! Defects these tests found (fixed with them; the first four in
//! `src/display.rs`):
//!
//! * scientific notation wrote Rust's exponent (`1.0000e9`, `1.0000e-5`);
//!   PyTorch writes Python's (`1.0000e+09`, `1.0000e-05`);
//! * integral floats whose largest magnitude was more than 1000 times the
//!   smallest printed as `[   1., 2000.]`; PyTorch switches to scientific
//!   notation there too (`[1.0000e+00, 2.0000e+03]`);
//! * the width was the longest string's, zeros, NaN and infinities
//!   included (`[-0.,  1.]`, `[nan,  1., inf]`); PyTorch's width comes from
//!   the nonzero finite elements alone, and longer strings stay unpadded;
//! * rows were never wrapped: PyTorch fits each row into 80 columns
//!   (`linewidth`), continuing it on the next line under its first element;
//! * `Communicator::init_rank` passed `world_size` to NCCL as a C int, so a
//!   world of 2^32 + 2 ranks became one of 2; more than `i32::MAX` ranks is
//!   now a value error;
//! * `split` with a list of sections did not count them against
//!   `MAX_PIECES` (as a split size and `chunk` do): `MAX_PIECES + 1` zero
//!   sizes for an empty dim made that many views.
//!
//! Examined and left: `Tensor::deep_clone` (PyTorch's `clone()`) and the
//! `*_like` constructors always make contiguous tensors, where PyTorch keeps
//! a dense input's strides (`x.t().clone().stride()` is `(1, 3)` for a
//! `(2, 3)` `x`; strata's is `(2, 1)`): strata has no memory formats, and
//! `contiguous()` is built on `deep_clone`. `deep_clone`'s doc now says so
//! (the `*_like` docs already did).

use strata_tensor::distributed::{Communicator, UniqueId};
use strata_tensor::{DType, Device, Tensor, TensorError, MAX_PIECES};

const CPU: Device = Device::Cpu;

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

fn arange_f32(n: usize) -> Tensor {
    Tensor::arange(0.0, n as f64, 1.0, Some(DType::F32), CPU).unwrap()
}

/// ```python
/// torch.tensor([1e9, 1.])        # tensor([1.0000e+09, 1.0000e+00])
/// torch.tensor([0.5, 1e-5])      # tensor([5.0000e-01, 1.0000e-05])
/// torch.tensor(1e10)             # tensor(1.0000e+10)
/// torch.tensor([123456.5, 1.])   # tensor([1.2346e+05, 1.0000e+00])
/// torch.tensor([1e-30, 1e30], dtype=torch.float64)
/// # tensor([1.0000e-30, 1.0000e+30], dtype=torch.float64)
/// torch.tensor([1e-300, 1.], dtype=torch.float64)
/// # tensor([1.0000e-300,  1.0000e+00], dtype=torch.float64)
/// torch.tensor([1e-4, 1.])       # tensor([1.0000e-04, 1.0000e+00])
/// torch.tensor([1e9, float('nan')])  # tensor([1.0000e+09,        nan])
/// ```
#[test]
fn scientific_notation_writes_pythons_exponent() {
    assert_eq!(
        f32s(&[1e9, 1.0]).to_string(),
        "tensor([1.0000e+09, 1.0000e+00])"
    );
    assert_eq!(
        f32s(&[0.5, 1e-5]).to_string(),
        "tensor([5.0000e-01, 1.0000e-05])"
    );
    let scalar = Tensor::from_slice(&[1e10f32], &[], CPU).unwrap();
    assert_eq!(scalar.to_string(), "tensor(1.0000e+10)");
    assert_eq!(
        f32s(&[123456.5, 1.0]).to_string(),
        "tensor([1.2346e+05, 1.0000e+00])"
    );
    let wide = Tensor::from_slice(&[1e-30f64, 1e30], &[2], CPU).unwrap();
    assert_eq!(
        wide.to_string(),
        "tensor([1.0000e-30, 1.0000e+30], dtype=torch.float64)"
    );
    // A three-digit exponent is longer than the others' width: they are
    // padded to it.
    let tiny = Tensor::from_slice(&[1e-300f64, 1.0], &[2], CPU).unwrap();
    assert_eq!(
        tiny.to_string(),
        "tensor([1.0000e-300,  1.0000e+00], dtype=torch.float64)"
    );
    assert_eq!(
        f32s(&[1e-4, 1.0]).to_string(),
        "tensor([1.0000e-04, 1.0000e+00])"
    );
    assert_eq!(
        f32s(&[1e9, f32::NAN]).to_string(),
        "tensor([1.0000e+09,        nan])"
    );
}

/// ```python
/// torch.tensor([1., 2000.])      # tensor([1.0000e+00, 2.0000e+03])
/// torch.tensor([1., 1000.])      # tensor([   1., 1000.])
/// torch.tensor([[1., -1.], [10., 100.]])
/// # tensor([[  1.,  -1.],
/// #         [ 10., 100.]])
/// ```
#[test]
fn integral_floats_of_spread_magnitudes_switch_to_scientific_notation() {
    assert_eq!(
        f32s(&[1.0, 2000.0]).to_string(),
        "tensor([1.0000e+00, 2.0000e+03])"
    );
    // A ratio of exactly 1000 stays in integer notation.
    assert_eq!(f32s(&[1.0, 1000.0]).to_string(), "tensor([   1., 1000.])");
    let m = Tensor::from_slice(&[1f32, -1., 10., 100.], &[2, 2], CPU).unwrap();
    assert_eq!(
        m.to_string(),
        "tensor([[  1.,  -1.],\n        [ 10., 100.]])"
    );
}

/// ```python
/// torch.tensor([-0., 1.])                # tensor([-0., 1.])
/// torch.tensor([nan, 1., inf])           # tensor([nan, 1., inf])
/// torch.tensor([nan, inf, 0.])           # tensor([nan, inf, 0.])
/// torch.tensor([-inf, 2.5])              # tensor([  -inf, 2.5000])
/// torch.tensor(-0.)                      # tensor(-0.)
/// torch.tensor(nan)                      # tensor(nan)
/// torch.tensor([0., 0.])                 # tensor([0., 0.])
/// torch.tensor([100., 0.125])            # tensor([100.0000,   0.1250])
/// ```
#[test]
fn only_nonzero_finite_elements_set_the_width() {
    assert_eq!(f32s(&[-0.0, 1.0]).to_string(), "tensor([-0., 1.])");
    assert_eq!(
        f32s(&[f32::NAN, 1.0, f32::INFINITY]).to_string(),
        "tensor([nan, 1., inf])"
    );
    assert_eq!(
        f32s(&[f32::NAN, f32::INFINITY, 0.0]).to_string(),
        "tensor([nan, inf, 0.])"
    );
    assert_eq!(
        f32s(&[f32::NEG_INFINITY, 2.5]).to_string(),
        "tensor([  -inf, 2.5000])"
    );
    let neg_zero = Tensor::from_slice(&[-0.0f32], &[], CPU).unwrap();
    assert_eq!(neg_zero.to_string(), "tensor(-0.)");
    let nan = Tensor::from_slice(&[f32::NAN], &[], CPU).unwrap();
    assert_eq!(nan.to_string(), "tensor(nan)");
    assert_eq!(f32s(&[0.0, 0.0]).to_string(), "tensor([0., 0.])");
    assert_eq!(
        f32s(&[100.0, 0.125]).to_string(),
        "tensor([100.0000,   0.1250])"
    );
}

/// ```python
/// torch.arange(30.)
/// # tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,
/// #         14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,
/// #         28., 29.])
/// torch.arange(60.).view(2, 30)        # rows at indent 9, same 14 per line
/// torch.arange(2000.) / 7              # summarised: the ` ...` counts as an element
/// torch.arange(40)                     # 18 integers of width 2 per line
/// ```
#[test]
fn rows_wrap_at_eighty_columns() {
    assert_eq!(
        arange_f32(30).to_string(),
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n\
         \x20       14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n\
         \x20       28., 29.])"
    );
    assert_eq!(
        arange_f32(60).view(&[2, 30]).unwrap().to_string(),
        "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n\
         \x20        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n\
         \x20        28., 29.],\n\
         \x20       [30., 31., 32., 33., 34., 35., 36., 37., 38., 39., 40., 41., 42., 43.,\n\
         \x20        44., 45., 46., 47., 48., 49., 50., 51., 52., 53., 54., 55., 56., 57.,\n\
         \x20        58., 59.]])"
    );
    assert_eq!(
        arange_f32(2000).div(7.0).unwrap().to_string(),
        "tensor([0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 2.8529e+02, 2.8543e+02,\n\
         \x20       2.8557e+02])"
    );
    assert_eq!(
        Tensor::arange(0, 40, 1, None, CPU).unwrap().to_string(),
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n\
         \x20       18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n\
         \x20       36, 37, 38, 39])"
    );
}

/// NCCL's `ncclCommInitRank(comm, nranks, id, rank)` takes `int nranks`: a
/// world of 2^32 + 2 ranks was passed as 2 (`world as c_int`), so a rank
/// joined a world of the wrong size. It is refused before any device or
/// NCCL is touched (so on a machine without either too).
#[test]
fn a_world_larger_than_nccl_counts_is_refused() {
    let id = UniqueId::from_bytes(&[0u8; UniqueId::BYTES]).unwrap();
    for world in [(1usize << 32) + 2, i32::MAX as usize + 1, usize::MAX] {
        match Communicator::init_rank(Device::Cuda(0), 1, world, &id) {
            Err(TensorError::Value { op, msg }) => {
                assert_eq!(op, "Communicator::init_rank");
                assert!(msg.contains("i32::MAX"), "{msg}");
            }
            other => panic!("world {world}: expected a Value error, got {other:?}"),
        }
    }
}

/// `split` returns at most `MAX_PIECES` pieces (its documented rule; a size
/// or a `chunk` count that would give more was already refused), but a list
/// of sections was not counted: `MAX_PIECES + 1` zero sizes for an empty
/// dim made that many views, gigabytes of handles. The count is now checked
/// before anything else (the zeroed list below is never read, so its pages
/// cost no memory). A few sections still split as PyTorch's
/// `torch.zeros(0).split([0, 0, 0])` (three empty tensors).
#[test]
fn split_into_more_sections_than_max_pieces_is_refused() {
    let empty = Tensor::zeros(&[0], DType::F32, CPU).unwrap();
    let sizes = vec![0i64; MAX_PIECES as usize + 1];
    match empty.split(sizes, 0) {
        Err(TensorError::Value { op, msg }) => {
            assert_eq!(op, "split");
            assert!(msg.contains("pieces"), "{msg}");
        }
        other => panic!("expected a Value error, got {:?}", other.map(|v| v.len())),
    }
    let pieces = empty.split(vec![0i64, 0, 0], 0).unwrap();
    assert_eq!(pieces.len(), 3);
    assert!(pieces.iter().all(|p| p.shape() == [0]));
}
