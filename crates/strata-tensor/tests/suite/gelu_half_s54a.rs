//! Session 54 (helper a): f16/bf16 GELU as PyTorch 2.15's CPU computes it
//! (one thread, AVX2), from `tests/data/gelu_half_s54a.json` written by
//! `benches/anchors/gen_gelu_half_s54a.py`: PyTorch's `GeluKernelImpl`
//! converts each vector of a 2-byte float tensor to f32, computes there and
//! rounds back; the exact form takes `Vectorized<float>::erf` (Abramowitz
//! and Stegun 7.1.26, strata's `erf_vec_f32`), not a correctly rounded erf.
//! Before: 217 of the 65,536 f16 values and 3 bf16 ones differed in the
//! exact form; after: none. The tanh form takes SLEEF's `tanhf` there, not
//! reproduced yet: 26 f16 values and 4 bf16 ones differ (pinned below).

use serde_json::Value;
use strata_tensor::{DType, Device, GeluApprox, Tensor};

use crate::pytorch_fixture::{check_fixture_and_probe, hex16};

const FIXTURE: &str = include_str!("../data/gelu_half_s54a.json");

fn check(text: &str) -> (usize, Vec<String>) {
    let fx: Value = serde_json::from_str(text).unwrap();
    let pats = hex16(fx["patterns"].as_str().unwrap());
    let n = pats.len();
    let mut bad = Vec::new();
    let mut count = 0;
    for (name, dtype) in [("f16", DType::F16), ("bf16", DType::BF16)] {
        let x = match dtype {
            DType::F16 => {
                let v: Vec<half::f16> = pats.iter().map(|&b| half::f16::from_bits(b)).collect();
                Tensor::from_slice(&v, &[n], Device::Cpu).unwrap()
            }
            _ => {
                let v: Vec<half::bf16> = pats.iter().map(|&b| half::bf16::from_bits(b)).collect();
                Tensor::from_slice(&v, &[n], Device::Cpu).unwrap()
            }
        };
        for (ap, approx) in [("none", GeluApprox::None), ("tanh", GeluApprox::Tanh)] {
            let want = hex16(fx[format!("{name}_{ap}")].as_str().unwrap());
            let y = x.gelu(approx).unwrap();
            assert_eq!(y.dtype(), dtype);
            let got: Vec<u16> = match dtype {
                DType::F16 => y
                    .to_vec::<half::f16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect(),
                _ => y
                    .to_vec::<half::bf16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect(),
            };
            let is_nan = |b: u16| match dtype {
                DType::F16 => half::f16::from_bits(b).is_nan(),
                _ => half::bf16::from_bits(b).is_nan(),
            };
            let diffs: Vec<usize> = (0..n)
                .filter(|&i| got[i] != want[i] && !(is_nan(got[i]) && is_nan(want[i])))
                .collect();
            count += n;
            if approx == GeluApprox::Tanh {
                // PyTorch's vectorised kernel takes SLEEF's `tanhf` (u10),
                // which strata does not reproduce (it takes the C library's):
                // the values that differ are pinned as few, each at most one
                // unit in the last place of the 2-byte type apart, or where
                // SLEEF's tanh is exactly ±1 (for |x| > 8.664339742) and
                // PyTorch's GELU a zero.
                let (limit_f16, limit_bf16) = if n > 60_000 { (26, 4) } else { (2, 0) };
                let limit = if dtype == DType::F16 {
                    limit_f16
                } else {
                    limit_bf16
                };
                for &i in &diffs {
                    let (g, w) = (got[i], want[i]);
                    let near = (g as i32 - w as i32).abs() == 1 && (g ^ w) & 0x8000 == 0;
                    let zero = w & 0x7fff == 0;
                    if !(near || zero) {
                        bad.push(format!(
                            "{name} gelu tanh of {:04x}: {g:04x} vs PyTorch {w:04x}",
                            pats[i]
                        ));
                    }
                }
                if diffs.len() > limit {
                    bad.push(format!(
                        "{name} gelu tanh: {} of {n} differ (at most {limit} expected)",
                        diffs.len()
                    ));
                }
                continue;
            }
            if let Some(&i) = diffs.first() {
                bad.push(format!(
                    "{name} gelu {ap}: {} of {n} differ, first x = {:04x}: {:04x} vs PyTorch {:04x}",
                    diffs.len(),
                    pats[i],
                    got[i],
                    want[i]
                ));
            }
        }
    }
    (count, bad)
}

#[test]
fn half_gelu_matches_pytorch_bit_for_bit() {
    check_fixture_and_probe(FIXTURE, 10_000, "STRATA_GELU_S54A_PROBE", check);
}
