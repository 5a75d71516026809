//! strata's CPU softmax and log-softmax, forward and backward, against
//! PyTorch 2.15's CPU kernels bit for bit, from three fixtures in
//! `tests/data/`, each made by the script of the same name in
//! `benches/anchors/`:
//!
//! * `softmax_backward_s45.json`: softmax's backward along a dim other than
//!   the last, in f32, f64, f16 and bf16. PyTorch's kernel accumulates
//!   `sum(g y)` along the dim with one fused multiply-add per element, as
//!   strata's does since session 45. The first case is gradient-oracle
//!   program 196:894's backward (`sum(softmax(x, 1))` scaled by 0.1875),
//!   exactly zero in PyTorch, where separately rounded products left 1e-9.
//! * `log_softmax_backward_s46.json`: log-softmax's backward along any dim,
//!   same dtypes. PyTorch forms `g - exp(y) sum(g)` with one fused
//!   multiply-add, as strata does since session 46. The fixture keeps the
//!   cases where PyTorch's vectorized `exp` agrees with the C library's (64
//!   of 69 drawn). The first case is gradient-oracle program 230:279's
//!   backward (`exp(log_softmax(x, 0))` summed: `exp(y) (1 - sum)`, 6.7e-9
//!   and up, where a separately rounded product gave multiples of each
//!   element's last place).
//! * `softmax_dims_s46.json`: PyTorch picks its kernels by the dim's index.
//!   Along the last dim it multiplies the exponentials by the reciprocal of
//!   their sum (strata divided until session 46, which differed on about a
//!   quarter of the elements of a `[64, 7]` f32 softmax); along a dim
//!   followed only by dims of size 1 (`[outer, n, 1]` along dim 1) the
//!   backward accumulates with multiply-adds, as along any non-last dim
//!   (strata took that dim for the last, as `inner == 1`). f32; forward rows
//!   kept where PyTorch's `exp` agrees with the C library's.

use crate::pytorch_fixture::{dtype, fixture, host, nums, same, shape, tensor_of};
use serde_json::Value;
use strata_tensor::{DType, Tensor};

/// Runs `backward(y, g, dim)` on every case of a backward fixture (`dtype`
/// defaults to f32, `dim` to 1) and lists those that differ from `dx`.
fn backward_failures(
    cases: &[Value],
    backward: impl Fn(&Tensor, &Tensor, i64) -> Vec<(&'static str, Tensor)>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let dt = c
            .get("dtype")
            .map_or(DType::F32, |d| dtype(d.as_str().expect("a dtype name")));
        let shape = shape(&c["shape"]);
        let dim = c.get("dim").map_or(1, |d| d.as_i64().unwrap());
        let y = tensor_of(&nums(&c["y"]), &shape, dt);
        let g = tensor_of(&nums(&c["g"]), &shape, dt);
        let want = nums(&c["dx"]);
        for (form, got) in backward(&y, &g, dim) {
            if !same(&host(&got), &want) {
                failures.push(format!("case {i} ({dt:?} {shape:?} dim {dim}) {form}"));
            }
        }
    }
    failures
}

#[test]
fn softmax_backward_along_an_inner_dim_is_pytorchs_bit_for_bit() {
    let doc = fixture(include_str!("../data/softmax_backward_s45.json"));
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 49);
    let failures = backward_failures(cases, |y, g, dim| {
        // The in-place form runs the same kernel over the gradient.
        let g2 = g.deep_clone().unwrap();
        y.softmax_backward_inplace(&g2, dim).unwrap();
        vec![("", y.softmax_backward(g, dim).unwrap()), ("in place", g2)]
    });
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

#[test]
fn log_softmax_backward_is_pytorchs_bit_for_bit() {
    let doc = fixture(include_str!("../data/log_softmax_backward_s46.json"));
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 65);
    let failures = backward_failures(cases, |y, g, dim| {
        vec![("", y.log_softmax_backward(g, dim).unwrap())]
    });
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

#[test]
fn softmax_along_the_last_dim_multiplies_by_the_reciprocal_as_pytorch() {
    let doc = fixture(include_str!("../data/softmax_dims_s46.json"));
    let cases = doc["forward"].as_array().unwrap();
    assert_eq!(cases.len(), 24);
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let n = c["n"].as_u64().unwrap() as usize;
        let x = tensor_of(&nums(&c["x"]), &[1, n], DType::F32);
        if !same(&host(&x.softmax(-1, None).unwrap()), &nums(&c["y"])) {
            failures.push(format!("row {i} of {n}"));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:?}");
}

#[test]
fn softmax_backward_along_a_dim_before_size_one_dims_is_pytorchs() {
    let doc = fixture(include_str!("../data/softmax_dims_s46.json"));
    let cases = doc["backward"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    let failures = backward_failures(cases, |y, g, dim| {
        vec![("", y.softmax_backward(g, dim).unwrap())]
    });
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}
