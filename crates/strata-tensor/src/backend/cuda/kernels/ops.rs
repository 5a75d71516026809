//! Op bodies: C statements computing the stored output `T0` from the stored
//! inputs `x1`, `x2`, `x3` and the scalar parameters `prm`, with the CPU
//! backend's semantics.

use super::{compute_ty, load, store};
use crate::backend::{BinaryOp, UnaryOp};
use crate::dtype::DType;

/// The scalar in slot `i` (0 or 1) of `prm`, as `d`'s compute type.
pub(crate) fn scalar(d: DType, i: usize) -> String {
    match d {
        DType::Bool => format!("(prm.i{i} != 0)"),
        _ if d.is_float() => format!("(({})prm.f{i})", compute_ty(d)),
        _ => format!("(({})prm.i{i})", compute_ty(d)),
    }
}

/// `a op b` for any op of the binary table in `d`'s compute type
/// (comparisons give a C bool).
pub(crate) fn arith(op: BinaryOp, d: DType, a: &str, b: &str) -> String {
    op.cuda_expr(d, a, b)
}

/// Body of `out = a op b` (both operands of dtype `d`; `b_scalar` when b is `prm` slot 0).
pub(crate) fn binary(op: BinaryOp, d: DType, b_scalar: bool) -> String {
    let c = compute_ty(d);
    let b = if b_scalar {
        scalar(d, 0)
    } else {
        load(d, "x2")
    };
    let out = if op.is_comparison() { DType::Bool } else { d };
    format!(
        "const {c} a = {}; const {c} b = {b}; return {};",
        load(d, "x1"),
        store(out, &op.cuda_expr(d, "a", "b"))
    )
}

/// Body of `out = op(a)`.
pub(crate) fn unary(op: UnaryOp, d: DType) -> String {
    let c = compute_ty(d);
    let expr = match op {
        UnaryOp::Map(f) => f.cuda_expr(d, "a"),
        UnaryOp::Clamp(..) => format!(
            "clamp_nan<{c}>(a, prm.has0 != 0, {}, prm.has1 != 0, {})",
            scalar(d, 0),
            scalar(d, 1)
        ),
    };
    format!(
        "const {c} a = {}; return {};",
        load(d, "x1"),
        store(d, &expr)
    )
}

/// Body of `out = src` converted from `s` to `d` with PyTorch's cast rules.
pub(crate) fn cast(s: DType, d: DType) -> String {
    if s == d {
        return "return x1;".to_string();
    }
    let (canon, is_float) = if s.is_float() {
        (format!("const double c = (double){};", load(s, "x1")), true)
    } else if s == DType::Bool {
        ("const i64 c = (x1 != 0) ? 1 : 0;".to_string(), false)
    } else {
        ("const i64 c = (i64)x1;".to_string(), false)
    };
    let conv = match (d, is_float) {
        (DType::F32, _) => "(float)c".to_string(),
        (DType::F64, _) => "(double)c".to_string(),
        (DType::F16, _) => "f2h((float)c)".to_string(),
        (DType::BF16, _) => "f2bf((float)c)".to_string(),
        (DType::I32, true) => "(int)(i64)c".to_string(),
        (DType::I64, true) => "(i64)c".to_string(),
        (DType::U8, true) => "(u8)(i64)c".to_string(),
        (DType::I32, false) => "(int)c".to_string(),
        (DType::I64, false) => "(i64)c".to_string(),
        (DType::U8, false) => "(u8)c".to_string(),
        (DType::Bool, true) => "(u8)(c != 0.0 ? 1 : 0)".to_string(),
        (DType::Bool, false) => "(u8)(c != 0 ? 1 : 0)".to_string(),
    };
    format!("{canon} return {conv};")
}

/// Body of `out = out + value * t1 * t2` (operands x1 = out, x2 = t1, x3 = t2).
pub(crate) fn addcmul(d: DType) -> String {
    let c = compute_ty(d);
    let v = scalar(d, 0);
    let prod = arith(BinaryOp::Mul, d, &arith(BinaryOp::Mul, d, "v", "a"), "b");
    let sum = arith(BinaryOp::Add, d, "x", &prod);
    format!(
        "const {c} v = {v}; const {c} x = {}; const {c} a = {}; const {c} b = {}; return {};",
        load(d, "x1"),
        load(d, "x2"),
        load(d, "x3"),
        store(d, &sum)
    )
}

/// Body of `out = cond ? a : b` (x1 = cond, stored as u8).
pub(crate) fn where_() -> String {
    "return x1 != 0 ? x2 : x3;".to_string()
}

/// Body of `out = the bits in prm.bits` (a stored element of T0).
pub(crate) fn fill() -> String {
    "union { u64 b; T0 v; } u; u.b = prm.bits; return u.v;".to_string()
}
