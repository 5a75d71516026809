//! Session 56's oracle sweep against PyTorch 2.15 (CPU, one thread):
//! `tests/data/grad_s56.json.gz`, written by `benches/anchors/gen_grad_s56.py`.
//!
//! Of the gradient fuzzer's seeds 351-366 (16000 programs), one differed
//! through a strata-autograd defect: the divisor's gradient of `a / b`
//! was `-((g a) / b) / b` where PyTorch's `div_tensor_other_backward` is
//! `-g ((a / b) / b)`. They round differently, and a divisor broadcast
//! over many elements sums terms that cancel (program 363:868 below: x1's
//! gradient is 0 in exact arithmetic, -3.8e-6 in PyTorch and was -1.9e-5
//! in strata). Fixed in `ops/binary.rs` (`div_other_grad`, also used by
//! the in-place `div_`). Every value and gradient here is compared bit for
//! bit.
//!
//! The three other programs that differed start outside strata-autograd,
//! in strata-tensor's f32 kernels (traced to their first differing value;
//! 351:1995 and 360:1484 agree with PyTorch since session 57, whose CPU
//! matmul sums small products in PyTorch's order: `oracle_s57.rs`):
//!
//! * 351:1995 (SGD through a GradScaler of scale 1e30 over `minimum(x0,
//!   x1)` of parameters that start tied, then `linear`): the linear's
//!   backward, a 3-term vector-matrix product, rounds as an f64 (or fused)
//!   accumulation where PyTorch adds the rounded products left to right
//!   (2.4375002e30 against 2.4375e30), so the next iteration breaks the
//!   tie the other way and the gradient goes to the other parameter.
//! * 360:1484 (`gelu_linear(tanh)` then `softmax`, Adam): the same 3-term
//!   product in the forward (one logit an ulp off); the softmax's sum has
//!   a gradient that is 0 in exact arithmetic, exactly 0 in PyTorch, a few
//!   ulps in strata, which Adam's normalisation turns into a step.
//! * 360:1864 (`gelu_linear(erf)`, `index_select` of one row three times,
//!   `std`): strata's f32 erf GELU differs from PyTorch's in the last bit
//!   (gelu(0.9) 0.73434585 against 0.73434591), and for the resulting row
//!   of three equal values neither PyTorch's nor strata's f32 mean is
//!   exact, so the std is 7.3e-8 instead of PyTorch's 0 and its gradient
//!   of order 1 instead of 0 (PyTorch's std of those three values is also
//!   7.3e-8).

use crate::pytorch_fixture::{dtype, fixture, gunzip, nums, shape, tensor_of};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Tensor};

static CASES: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/grad_s56.json.gz")))["cases"].clone());

fn case(name: &str) -> &'static Value {
    let c = &CASES[name];
    assert!(!c.is_null(), "no case {name} in the fixture");
    c
}

/// The tensor a fixture entry (`dtype`, `shape`, `data`) holds.
fn want(j: &Value) -> Tensor {
    tensor_of(
        &nums(&j["data"]),
        &shape(&j["shape"]),
        dtype(j["dtype"].as_str().unwrap()),
    )
}

fn leaf(j: &Value) -> Var {
    Var::parameter(want(j)).unwrap()
}

/// `got` against PyTorch's `j`: the dtype, the shape and every value's bits
/// (NaN matching NaN).
fn same(got: &Tensor, j: &Value, what: &str) {
    let w = want(j);
    assert_eq!(got.dtype(), w.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    let (g, w) = (
        got.to_vec_as::<f64>().unwrap(),
        w.to_vec_as::<f64>().unwrap(),
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            "{what}[{i}]: strata {a:e}, PyTorch {b:e}"
        );
    }
}

fn grad(v: &Var) -> Tensor {
    v.grad().expect("a gradient")
}

#[test]
fn program_363_868_divisor_gradient_that_cancels_as_pytorch() {
    let c = case("program_363_868");
    const X: [f64; 16] = [
        1.2121858596801758,
        -0.5,
        0.0831785798072815,
        -1.0516719818115234,
        1.0171607732772827,
        0.3596157729625702,
        0.03530529513955116,
        -0.44447314739227295,
        0.788643479347229,
        -0.09249414503574371,
        1.297451376914978,
        0.740851104259491,
        -0.19342397153377533,
        0.014710036106407642,
        -1.360173225402832,
        -0.15403848886489868,
    ];
    const G: [f64; 16] = [
        0.5, -0.5, -0.25, -0.25, -1.0, 0.5, -0.25, 0.5, 0.0, -0.25, 0.0, 1.5, -2.0, -1.5, -1.5, 0.0,
    ];
    let x0 = Var::parameter(tensor_of(&X, &[4, 4, 1], DType::F32)).unwrap();
    let x1 = Var::parameter(tensor_of(&[1.0], &[1, 1, 1], DType::F32)).unwrap();
    let y = x0.add(0.0).unwrap();
    y.mul_(&x1).unwrap();
    let o = y.sum(Some(&[2, -2, -3]), true).unwrap().div(&y).unwrap();
    o.backward_with(Some(&tensor_of(&G, &[4, 4, 1], DType::F32)), false)
        .unwrap();
    same(o.data(), &c["out"], "out");
    same(&grad(&x0), &c["x0"], "x0");
    same(&grad(&x1), &c["x1"], "x1");
}

#[test]
fn broadcast_divisors_of_every_dtype_mix_get_pytorchs_gradient_bits() {
    for name in [
        "row",
        "column",
        "scalar",
        "outer",
        "f64_divisor",
        "f16_dividend",
        "bf16_dividend",
        "f64_both",
    ] {
        let c = case(&format!("div_{name}"));
        let (a, b) = (leaf(&c["a"]), leaf(&c["b"]));
        let y = a.div(&b).unwrap();
        y.backward_with(Some(&want(&c["g"])), false).unwrap();
        same(y.data(), &c["out"], &format!("{name}: out"));
        same(&grad(&a), &c["ga"], &format!("{name}: a's gradient"));
        same(&grad(&b), &c["gb"], &format!("{name}: b's gradient"));
    }
}

#[test]
fn in_place_div_on_a_non_leaf_and_on_its_view_as_pytorch() {
    for (name, view) in [("inplace", false), ("inplace_view", true)] {
        let c = case(&format!("div_{name}"));
        let (x, b) = (leaf(&c["x"]), leaf(&c["b"]));
        let y = x.add(0.0).unwrap();
        if view {
            y.narrow(1, 3, 4).unwrap().div_(&b).unwrap();
        } else {
            y.div_(&b).unwrap();
        }
        y.backward_with(Some(&want(&c["g"])), false).unwrap();
        same(y.data(), &c["out"], &format!("{name}: out"));
        same(&grad(&x), &c["gx"], &format!("{name}: x's gradient"));
        same(&grad(&b), &c["gb"], &format!("{name}: b's gradient"));
    }
}
