//! Session 82: `bitwise_and`, `bitwise_or`, `bitwise_xor` (a tensor or a
//! scalar operand; in place too) and `bitwise_not` against PyTorch 2.15's
//! CPU (`benches/anchors/gen_bitwise_s82.py`): operands of every dtype
//! (floats refused), empty and 0-d shapes, transposed operands, operands
//! that broadcast or not, mixed dtypes (type promotion), scalars of each
//! kind at the integer dtypes' edges. Each call must give PyTorch's dtype,
//! shape and values or fail where PyTorch raised (through
//! `shape_stats_s79`'s replay). Property tests check De Morgan's laws and
//! the scalar forms against the tensor ones.

use crate::shape_stats_s79::assert_fixture_agrees;
use proptest::prelude::*;
use std::sync::LazyLock;
use strata_tensor::{Device, Tensor};

static TEXT: LazyLock<String> =
    LazyLock::new(|| crate::pytorch_fixture::gunzip(include_bytes!("../data/bitwise_s82.json.gz")));

#[test]
fn bitwise_ops_match_pytorch() {
    assert_fixture_agrees(&TEXT, 2_000, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn bitwise_ops_match_pytorch_on_a_gpu() {
    assert_fixture_agrees(&TEXT, 2_000, crate::hostile_calls::gpu());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `!(a & b) == !a | !b`, `!(a | b) == !a & !b`, `a ^ b == (a | b) &
    /// !(a & b)`, and each op with a scalar equals it with a tensor filled
    /// with that scalar, elementwise against Rust's own operators.
    #[test]
    fn bitwise_ops_are_rusts_and_keep_de_morgans_laws(
        a in prop::collection::vec(any::<i64>(), 1..24),
        s in any::<i64>(),
    ) {
        let n = a.len();
        let b: Vec<i64> = a.iter().rev().map(|x| x.rotate_left(7)).collect();
        let (ta, tb) = (
            Tensor::from_slice(&a, &[n], Device::Cpu).unwrap(),
            Tensor::from_slice(&b, &[n], Device::Cpu).unwrap(),
        );
        let v = |t: Tensor| t.to_vec::<i64>().unwrap();
        let and = v(ta.bitwise_and(&tb).unwrap());
        let or = v(ta.bitwise_or(&tb).unwrap());
        let xor = v(ta.bitwise_xor(&tb).unwrap());
        let not_a = v(ta.bitwise_not().unwrap());
        for i in 0..n {
            prop_assert_eq!(and[i], a[i] & b[i]);
            prop_assert_eq!(or[i], a[i] | b[i]);
            prop_assert_eq!(xor[i], a[i] ^ b[i]);
            prop_assert_eq!(not_a[i], !a[i]);
        }
        let lhs = v(ta.bitwise_and(&tb).unwrap().bitwise_not().unwrap());
        let rhs = v(ta.bitwise_not().unwrap().bitwise_or(&tb.bitwise_not().unwrap()).unwrap());
        prop_assert_eq!(lhs, rhs);
        let filled = Tensor::full(&[n], s, strata_tensor::DType::I64, Device::Cpu).unwrap();
        prop_assert_eq!(v(ta.bitwise_xor(s).unwrap()), v(ta.bitwise_xor(&filled).unwrap()));
        prop_assert_eq!(v(ta.bitwise_and(s).unwrap()), v(ta.bitwise_and(&filled).unwrap()));
    }
}
