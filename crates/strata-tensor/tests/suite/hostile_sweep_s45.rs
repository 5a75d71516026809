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
//! * `pow` by the scalar exponents PyTorch's kernels special-case was
//!   computed with `powf`: PyTorch computes `x ^ 2`, `x ^ 3` and `x ^ -2` as
//!   `x * x`, `x * x * x` and `1 / (x * x)` (each operation rounded to the
//!   dtype; f32, f64 and bf16, the bf16 exponent compared after its
//!   conversion) and `x ^ -1` as `reciprocal`. About a quarter of the
//!   elements of an f32, f64 or bf16 `x.pow(3)` or `x.pow(-2)` were an ulp
//!   off PyTorch's, and a few of `x.pow(2)` and `x.pow(-1)` (`1e20f32.pow(-2)`
//!   was 1e-40, PyTorch 0: the square overflows). They are now PyTorch's
//!   bit for bit. (Other exponents stay `powf`: PyTorch's own results there
//!   depend on whether an element falls in a vectorised block, Sleef's
//!   `powf` within an ulp, or in the scalar tail, `pow` in f64.)

use crate::pytorch_fixture::{host, tensor as of};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// Bit for bit (NaN matching NaN).
fn same(got: &[f64], want: &[f64], what: &str) {
    let ok = crate::pytorch_fixture::same(got, want);
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
    // f32 keeps its exponent, as a double: torch.tensor([99.]).pow(2.2) ->
    // 24569.5625 (PyTorch 2.15's scalar loop, `std::pow(float, double)`;
    // its vectorised loop, over 32 or more contiguous elements, rounds 2.2
    // to f32 and gives 24569.568359375; session 80, fuzz_conformance_s80).
    let x = of(&[99.0], DType::F32);
    same(&host(&x.pow(2.2).unwrap()), &[24_569.562_5], "f32 pow 2.2");
    // The overflow check is unchanged: f16 ** 70000.5 is refused.
    assert!(of(&[1.0], DType::F16).pow(70000.5).is_err());
}

#[test]
fn special_powers_are_pytorchs_products() {
    // x = torch.tensor(xs, dtype=dt); x.pow(e) for e in [2, 3, -2, -1] (the
    // same for 2.0, 3.0, -2.0, -1.0, and for pow_).
    type Case = (DType, &'static [f64], [&'static [f64]; 4]);
    let cases: [Case; 3] = [
        (
            DType::F32,
            &[
                -2.243_191_003_799_438_5,
                2.552_360_057_830_810_5,
                -0.681_664_168_834_686_3,
                1e20,
                0.0,
                -0.0,
            ],
            [
                &[
                    5.031_905_651_092_529,
                    6.514_542_102_813_721,
                    0.464_666_038_751_602_2,
                    f64::INFINITY,
                    0.0,
                    0.0,
                ],
                &[
                    -11.287_525_177_001_953,
                    16.627_456_665_039_062,
                    -0.316_746_175_289_154_05,
                    f64::INFINITY,
                    0.0,
                    -0.0,
                ],
                &[
                    0.198_731_869_459_152_22,
                    0.153_502_732_515_335_08,
                    2.152_083_158_493_042,
                    0.0,
                    f64::INFINITY,
                    f64::INFINITY,
                ],
                &[
                    -0.445_793_509_483_337_4,
                    0.391_794_264_316_558_84,
                    -1.466_997_981_071_472_2,
                    9.999_999_682_655_225e-21,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                ],
            ],
        ),
        (
            DType::F64,
            &[
                2.394_604_502_841_675_6,
                -0.728_326_786_442_279_6,
                1.379_532_546_988_856_2,
                -3.848_079_924_651_908_6,
            ],
            [
                &[
                    5.734_130_725_029_629,
                    0.530_459_907_849_337_8,
                    1.903_110_048_201_560_8,
                    14.807_719_106_509_039,
                ],
                &[
                    13.730_975_254_038_752,
                    -0.386_348_160_020_376,
                    2.625_402_251_995_584,
                    -56.981_286_623_641_93,
                ],
                &[
                    0.174_394_349_894_217_48,
                    1.885_156_606_941_955_4,
                    0.525_455_688_148_46,
                    0.067_532_345_313_089_4,
                ],
                &[
                    0.417_605_495_526_839_9,
                    -1.373_010_053_474_465_6,
                    0.724_883_223_801_227_2,
                    -0.259_869_862_263_959_75,
                ],
            ],
        ),
        (
            DType::BF16,
            &[0.777_343_75, 4.156_25, 0.703_125],
            [
                &[0.605_468_75, 17.25, 0.494_140_625],
                &[0.470_703_125, 71.5, 0.347_656_25],
                &[1.648_437_5, 0.057_861_328_125, 2.031_25],
                &[1.289_062_5, 0.240_234_375, 1.421_875],
            ],
        ),
    ];
    for (dtype, xs, wants) in cases {
        let x = of(xs, dtype);
        for (e, want) in [2i64, 3, -2, -1].into_iter().zip(wants) {
            same(&host(&x.pow(e).unwrap()), want, &format!("{dtype} pow {e}"));
            same(
                &host(&x.pow(e as f64).unwrap()),
                want,
                &format!("{dtype} pow {e}.0"),
            );
            let y = x.deep_clone().unwrap();
            y.pow_(e).unwrap();
            same(&host(&y), want, &format!("{dtype} pow_ {e}"));
        }
    }
    // A strided view in place: the products are written through the view.
    let m = of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], DType::F32)
        .reshape(&[2, 3])
        .unwrap();
    m.t().unwrap().narrow(0, 1, 2).unwrap().pow_(3).unwrap();
    same(
        &host(&m),
        &[1.0, 8.0, 27.0, 4.0, 125.0, 216.0],
        "pow_ 3 of a strided view",
    );
    // The bf16 exponent is compared after its conversion: 3.0000001 is 3 in
    // bf16 -> the products, [0.470703125, 71.5]; 3.01 is not -> [0.46875, 73.5].
    let x = of(&[0.777_343_75, 4.156_25], DType::BF16);
    same(
        &host(&x.pow(3.000_000_1).unwrap()),
        &[0.470_703_125, 71.5],
        "bf16 pow 3.0000001",
    );
    same(
        &host(&x.pow(3.01).unwrap()),
        &[0.468_75, 73.5],
        "bf16 pow 3.01",
    );
}
