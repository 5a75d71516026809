//! Session 45's sweep of strata-tensor. Every expected value is PyTorch
//! 2.15's (CPU), with the Python beside each test.
//!
//! Defect these tests found (fixed with them):
//!
//! * `pow` of an f16 or bf16 tensor by a scalar exponent computed with the
//!   exponent as an f32, where PyTorch's f16/bf16 pow kernels (CPU and
//!   CUDA) first convert it to the tensor's dtype (`exp_scalar.to<scalar_t>()`):
//!   `x.pow(2.2)` is `x ^ 2.19921875` in f16 and `x ^ 2.203125` in bf16.
//!   strata's results were off from PyTorch's in most elements of such a
//!   power (99^2.2: 24576 where PyTorch gives 24480 in f16 and 24960 in
//!   bf16), and an exponent below the dtype's smallest subnormal was not 0
//!   (`x.pow(1e-8)` of an f16 `[inf, 0, 3]` gave `[inf, 0, 1]`, PyTorch
//!   `[1, 1, 1]`). The exponent is now converted as PyTorch converts it
//!   (the overflow check, `70000` for f16, was already PyTorch's).

use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

fn of(v: &[f64], dtype: DType) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

fn host(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// Bit for bit (NaN matching NaN).
fn same(got: &[f64], want: &[f64], what: &str) {
    let ok = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits());
    assert!(ok, "{what}: got {got:?}, PyTorch {want:?}");
}

#[test]
fn half_powers_take_the_exponent_in_their_dtype_as_pytorch() {
    // xs = [0.5, 1.5, 3.0, 7.25, 10.0, 50.0, 99.0]
    // torch.tensor(xs, dtype=dt).pow(e).float().tolist()
    let xs = [0.5, 1.5, 3.0, 7.25, 10.0, 50.0, 99.0];
    let cases: [(DType, f64, [f64; 7]); 6] = [
        (
            DType::F16,
            2.2,
            [
                0.2177734375,
                2.439453125,
                11.203125,
                78.0,
                158.25,
                5452.0,
                24480.0,
            ],
        ),
        (
            DType::F16,
            0.1,
            [
                0.93310546875,
                1.041015625,
                1.1162109375,
                1.21875,
                1.2587890625,
                1.478515625,
                1.5830078125,
            ],
        ),
        (
            DType::F16,
            -0.3,
            [
                1.2314453125,
                0.88525390625,
                0.71923828125,
                0.5517578125,
                0.5009765625,
                0.30908203125,
                0.251953125,
            ],
        ),
        (
            DType::BF16,
            2.2,
            [0.216796875, 2.4375, 11.25, 78.5, 160.0, 5536.0, 24960.0],
        ),
        (
            DType::BF16,
            0.1,
            [
                0.93359375, 1.0390625, 1.1171875, 1.21875, 1.2578125, 1.4765625, 1.5859375,
            ],
        ),
        (
            DType::BF16,
            -0.3,
            [
                1.234375,
                0.88671875,
                0.71875,
                0.55078125,
                0.5,
                0.30859375,
                0.251953125,
            ],
        ),
    ];
    for (dtype, e, want) in cases {
        let x = of(&xs, dtype);
        same(
            &host(&x.pow(e).unwrap()),
            &want,
            &format!("{dtype} pow {e}"),
        );
        // In place, and by a 0-d f32 tensor (converted to the dtype as an
        // operand): the same values.
        let y = x.deep_clone().unwrap();
        y.pow_(e).unwrap();
        same(&host(&y), &want, &format!("{dtype} pow_ {e}"));
        let t = Tensor::scalar(e, DType::F32, CPU).unwrap();
        same(
            &host(&x.pow(&t).unwrap()),
            &want,
            &format!("{dtype} pow 0-d f32 {e}"),
        );
    }
    // torch.tensor([inf, 0., 3.], dtype=dt).pow(1e-8): the exponent is 0 in
    // f16 -> [1, 1, 1]; bf16 holds 1e-8 -> [inf, 0, 1].
    let x = of(&[f64::INFINITY, 0.0, 3.0], DType::F16);
    same(&host(&x.pow(1e-8).unwrap()), &[1.0; 3], "f16 pow 1e-8");
    let x = of(&[f64::INFINITY, 0.0, 3.0], DType::BF16);
    same(
        &host(&x.pow(1e-8).unwrap()),
        &[f64::INFINITY, 0.0, 1.0],
        "bf16 pow 1e-8",
    );
    // An integer exponent too: 2049 is 2048 in f16 and bf16, so
    // torch.tensor([-1., 2.], dtype=dt).pow(2049) -> [1, inf].
    for dtype in [DType::F16, DType::BF16] {
        let x = of(&[-1.0, 2.0], dtype);
        same(
            &host(&x.pow(2049i64).unwrap()),
            &[1.0, f64::INFINITY],
            &format!("{dtype} pow 2049"),
        );
    }
    // f32 keeps its exponent: torch.tensor([99.]).pow(2.2) -> 24569.568359375.
    let x = of(&[99.0], DType::F32);
    same(
        &host(&x.pow(2.2).unwrap()),
        &[24_569.568_359_375],
        "f32 pow 2.2",
    );
    // The overflow check is unchanged: f16 ** 70000.5 is refused.
    assert!(of(&[1.0], DType::F16).pow(70000.5).is_err());
}
