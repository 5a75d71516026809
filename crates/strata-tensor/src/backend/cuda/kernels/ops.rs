//! Op bodies: C statements computing the stored output `T0` from the stored
//! inputs `x1`, `x2`, `x3` and the scalar parameters `prm`, with the CPU
//! backend's semantics.

use super::{compute_ty, load, store, wrap_ty};
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

/// `a op b` for arithmetic ops in `d`'s compute type.
pub(crate) fn arith(op: BinaryOp, d: DType, a: &str, b: &str) -> String {
    let c = compute_ty(d);
    let u = wrap_ty(d);
    match d {
        DType::Bool => match op {
            BinaryOp::Add => format!("({a} | {b})"),
            BinaryOp::Sub => format!("({a} ^ {b})"),
            _ => format!("({a} & {b})"),
        },
        _ if d.is_float() => {
            let f = d != DType::F64;
            match op {
                BinaryOp::Add => format!("({a} + {b})"),
                BinaryOp::Sub => format!("({a} - {b})"),
                BinaryOp::Mul => format!("({a} * {b})"),
                BinaryOp::Div => format!("({a} / {b})"),
                BinaryOp::DivTrunc => {
                    format!("{}(({a}) / ({b}))", if f { "truncf" } else { "trunc" })
                }
                BinaryOp::DivFloor => {
                    format!("{}({a}, {b})", if f { "divfloor_f" } else { "divfloor_d" })
                }
                _ => unreachable!("comparison routed to arith"),
            }
        }
        DType::U8 => match op {
            BinaryOp::Add => format!("((u8)({a} + {b}))"),
            BinaryOp::Sub => format!("((u8)({a} - {b}))"),
            BinaryOp::Mul => format!("((u8)((u32){a} * (u32){b}))"),
            BinaryOp::Div | BinaryOp::DivTrunc | BinaryOp::DivFloor => format!("udiv({a}, {b})"),
            _ => unreachable!("comparison routed to arith"),
        },
        _ => match op {
            BinaryOp::Add => format!("wadd<{c}, {u}>({a}, {b})"),
            BinaryOp::Sub => format!("wsub<{c}, {u}>({a}, {b})"),
            BinaryOp::Mul => format!("wmul<{c}, {u}>({a}, {b})"),
            BinaryOp::Div | BinaryOp::DivTrunc => format!("sdiv<{c}, {u}>({a}, {b})"),
            BinaryOp::DivFloor => format!("sdivfloor<{c}, {u}>({a}, {b})"),
            _ => unreachable!("comparison routed to arith"),
        },
    }
}

/// `a op b` for comparisons.
pub(crate) fn compare(op: BinaryOp, a: &str, b: &str) -> String {
    let o = match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        _ => unreachable!("arithmetic routed to compare"),
    };
    format!("({a} {o} {b})")
}

/// Body of `out = a op b` (both operands of dtype `d`; `b_scalar` when b is `prm` slot 0).
pub(crate) fn binary(op: BinaryOp, d: DType, b_scalar: bool) -> String {
    let c = compute_ty(d);
    let b = if b_scalar {
        scalar(d, 0)
    } else {
        load(d, "x2")
    };
    let (expr, out) = if op.is_comparison() {
        (compare(op, "a", "b"), DType::Bool)
    } else {
        (arith(op, d, "a", "b"), d)
    };
    format!(
        "const {c} a = {}; const {c} b = {b}; return {};",
        load(d, "x1"),
        store(out, &expr)
    )
}

/// Body of `out = op(a)`.
pub(crate) fn unary(op: UnaryOp, d: DType) -> String {
    let c = compute_ty(d);
    let f = d != DType::F64;
    let expr = match op {
        UnaryOp::Neg => match d {
            DType::Bool => "a".to_string(),
            DType::U8 => "((u8)(0u - (u32)a))".to_string(),
            _ if d.is_float() => "(-a)".to_string(),
            _ => format!("wneg<{c}, {}>(a)", wrap_ty(d)),
        },
        UnaryOp::Relu => match d {
            DType::Bool => "a".to_string(),
            _ => format!("(a < ({c})0 ? ({c})0 : a)"),
        },
        UnaryOp::Exp if d.is_float() => format!("{}(a)", if f { "expf" } else { "exp" }),
        UnaryOp::Log if d.is_float() => format!("{}(a)", if f { "logf" } else { "log" }),
        UnaryOp::Exp | UnaryOp::Log => "a".to_string(),
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
