//! f16/bf16 tensors to and from their bit patterns, as the bit-for-bit
//! fixtures of half-precision ops compare them (strata-tensor's suite only:
//! `pytorch_fixture.rs` is shared with strata-autograd's, which has no
//! `half`).

use crate::pytorch_fixture::ints;
use serde_json::Value;
use strata_tensor::{DType, Device, Tensor};

/// The NaN pattern [`half_bits`] and [`canonical_half`] give every NaN of
/// `dt` (f16's or bf16's quiet NaN, as PyTorch prints them).
pub fn canonical_nan(dt: DType) -> u16 {
    if dt == DType::F16 {
        0x7e00
    } else {
        0x7fc0
    }
}

/// A 1-D f16 (else bf16) tensor of the bit patterns `b`.
pub fn half_tensor(b: &[u16], dt: DType) -> Tensor {
    if dt == DType::F16 {
        let v: Vec<half::f16> = b.iter().map(|&x| half::f16::from_bits(x)).collect();
        Tensor::from_slice(&v, &[v.len()], Device::Cpu).unwrap()
    } else {
        let v: Vec<half::bf16> = b.iter().map(|&x| half::bf16::from_bits(x)).collect();
        Tensor::from_slice(&v, &[v.len()], Device::Cpu).unwrap()
    }
}

/// The bit patterns of the f16 (else bf16) `t` in row-major order, every NaN
/// as [`canonical_nan`].
pub fn half_bits(t: &Tensor) -> Vec<u16> {
    let nan = canonical_nan(t.dtype());
    if t.dtype() == DType::F16 {
        let v = t.to_vec::<half::f16>().unwrap();
        v.iter()
            .map(|v| if v.is_nan() { nan } else { v.to_bits() })
            .collect()
    } else {
        let v = t.to_vec::<half::bf16>().unwrap();
        v.iter()
            .map(|v| if v.is_nan() { nan } else { v.to_bits() })
            .collect()
    }
}

/// `want`'s f16 (else bf16) patterns with every NaN as [`canonical_nan`].
pub fn canonical_half(want: &[u16], dt: DType) -> Vec<u16> {
    let is_nan = |b: u16| {
        if dt == DType::F16 {
            half::f16::from_bits(b).is_nan()
        } else {
            half::bf16::from_bits(b).is_nan()
        }
    };
    want.iter()
        .map(|&b| if is_nan(b) { canonical_nan(dt) } else { b })
        .collect()
}

/// The FNV-1a hash of 16-bit patterns (little-endian bytes), as the
/// generators write it for whole-range checks.
pub fn fnv16(v: &[u16]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in v {
        for byte in b.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// A unary op of all 65,536 patterns of `dt`, contiguous (PyTorch's
/// vectorised loop) and as `x[::2]` of a doubled storage (every element its
/// scalar loop's), against the generator's record `all` of PyTorch's: the
/// patterns whose two results differ (`differ`, `[input, stepped,
/// contiguous]`) and the FNV-1a hashes of both results. Returns how many
/// patterns differ in PyTorch.
pub fn check_every_bit_pattern(
    all: &Value,
    dt: DType,
    name: &str,
    op: impl Fn(&Tensor) -> Tensor,
) -> usize {
    let pats: Vec<u16> = (0..=u16::MAX).collect();
    let contiguous = half_bits(&op(&half_tensor(&pats, dt)));
    let wide: Vec<u16> = pats.iter().flat_map(|&p| [p, 0]).collect();
    let stepped = half_tensor(&wide, dt)
        .as_strided(&[65536], &[2], Some(0))
        .unwrap();
    let stepped = half_bits(&op(&stepped));
    let want_differ: Vec<[u16; 3]> = all["differ"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let v = ints(d);
            [v[0] as u16, v[1] as u16, v[2] as u16]
        })
        .collect();
    let got_differ: Vec<[u16; 3]> = (0..65536)
        .filter(|&i| contiguous[i] != stepped[i])
        .map(|i| [i as u16, stepped[i], contiguous[i]])
        .collect();
    assert_eq!(
        got_differ, want_differ,
        "{name}: the values where the two loops differ"
    );
    assert_eq!(
        fnv16(&contiguous),
        all["contiguous"].as_str().unwrap(),
        "{name} contiguous"
    );
    assert_eq!(
        fnv16(&stepped),
        all["stepped"].as_str().unwrap(),
        "{name} stepped"
    );
    want_differ.len()
}
