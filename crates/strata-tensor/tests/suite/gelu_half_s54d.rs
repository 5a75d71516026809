//! Helper-98: f16/bf16 exact GELU on the elements PyTorch 2.15's CPU kernel
//! computes in its scalar loop, from `tests/data/gelu_half_s54d.json.gz`
//! written by `benches/anchors/gen_gelu_half_s54d.py` (one thread, AVX2).
//! `GeluKernelImpl` runs through `cpu_kernel_vec`: whole chunks of 32
//! elements of each of TensorIterator's inner rows take
//! `Vectorized<float>::erf` (strata's `Math::gelu_vec_`), the rest of a row
//! and every element of a row the input is not contiguous along take
//! `std::erf` in f32 (strata's f32 GELU rounded back), which differ on 217
//! f16 values and 3 bf16 ones. Before, strata took the vectorised formula
//! everywhere: 69 of the 96 layout cases here differed.
//!
//! Cases: lengths 0 to 1000 around multiples of 32, a 0-d tensor, an
//! offset, 2-D shapes with inner sizes around 32 and their transposes, rows
//! cut out of wider matrices (and transposed), stepped, permuted, expanded
//! and size-1-dim inputs; and every bit pattern as one contiguous tensor
//! (all vectorised) and one stepped view (all scalar), by hash and by the
//! patterns where the two differ. The results' strides are PyTorch's too
//! (since helper-105 a transposed or permuted input gives a result laid out
//! in its order, as PyTorch's TensorIterator lays it out).

use crate::half_bits::{check_every_bit_pattern, half_bits, half_tensor};
use crate::pytorch_fixture::{dtype, fixture, gunzip, hex16, ints};
use serde_json::Value;
use strata_tensor::{DType, GeluApprox};

fn load() -> Value {
    fixture(&gunzip(include_bytes!("../data/gelu_half_s54d.json.gz")))
}

#[test]
fn half_gelu_scalar_loop_elements_match_pytorch_by_layout() {
    let fx = load();
    let cases = fx["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    let mut vec_differs = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let dt = dtype(c["dtype"].as_str().unwrap());
        let x = half_tensor(&hex16(c["base"].as_str().unwrap()), dt)
            .as_strided(
                &ints(&c["size"]),
                &ints(&c["stride"]),
                Some(c["offset"].as_i64().unwrap()),
            )
            .unwrap();
        let y = x.gelu(GeluApprox::None).unwrap();
        let want = hex16(c["out"].as_str().unwrap());
        let got = half_bits(&y);
        let shape: Vec<i64> = y.shape().iter().map(|&s| s as i64).collect();
        let strides: Vec<i64> = y.strides().iter().map(|&s| s as i64).collect();
        if y.dtype() != dt || shape != ints(&c["size"]) {
            bad.push(format!("{name}: dtype {:?} shape {shape:?}", y.dtype()));
            continue;
        }
        // Strides of dims of size 1 are free.
        let want_strides = ints(&c["strides"]);
        if (0..y.ndim()).any(|d| y.shape()[d] > 1 && strides[d] != want_strides[d]) {
            bad.push(format!(
                "{name}: strides {strides:?}, PyTorch's {want_strides:?}"
            ));
        }
        let is_nan = |b: u16| match dt {
            DType::F16 => half::f16::from_bits(b).is_nan(),
            _ => half::bf16::from_bits(b).is_nan(),
        };
        let diffs: Vec<usize> = (0..want.len())
            .filter(|&i| got[i] != want[i] && !(is_nan(got[i]) && is_nan(want[i])))
            .collect();
        if let Some(&i) = diffs.first() {
            bad.push(format!(
                "{name}: {} of {} differ, first at {i}: {:04x} vs PyTorch {:04x}",
                diffs.len(),
                want.len(),
                got[i],
                want[i]
            ));
        }
        vec_differs += usize::from(c["vec_differs"].as_bool().unwrap());
    }
    assert!(
        bad.is_empty(),
        "{} of {}:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
    // The layouts where the scalar loop's values matter.
    assert!(vec_differs >= 60, "{vec_differs}");
}

#[test]
fn half_gelu_of_every_bit_pattern_contiguous_and_stepped_matches_pytorch() {
    let fx = load();
    for name in ["f16", "bf16"] {
        check_every_bit_pattern(&fx["all"][name], dtype(name), name, |x| {
            x.gelu(GeluApprox::None).unwrap()
        });
    }
}
