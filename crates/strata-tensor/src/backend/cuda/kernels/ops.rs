//! Op bodies: C statements computing the stored output `T0` from the stored
//! inputs `x1`, `x2`, `x3` and the scalar parameters `prm`, with the CPU
//! backend's semantics.

use super::{compute_ty, expand, load, store};
use crate::backend::UnaryFn;
use crate::backend::{BinaryOp, UnaryOp};
use crate::dtype::DType;
use crate::ops::table::{binary_op_table, unary_op_table};

/// The scalar in slot `i` (0 or 1) of `prm`, as `d`'s compute type.
pub(crate) fn scalar(d: DType, i: usize) -> String {
    match d {
        DType::Bool => format!("(prm.i{i} != 0)"),
        _ if d.is_float() => format!("(({})prm.f{i})", compute_ty(d)),
        _ => format!("(({})prm.i{i})", compute_ty(d)),
    }
}

/// The CUDA expressions of the unary table's ops.
macro_rules! cuda_unary {
    ($(
        $(#[$doc:meta])*
        $V:ident {
            $(method: $m:ident,)?
            $(named: $n:ident,)?
            $(inplace: $(#[$idoc:meta])* $ip:ident,)?
            dtypes: $rule:ident,
            cpu: |$x:ident| $cpu:expr,
            cuda: { float: $cf:literal $(, int: $ci:literal)? }
        }
    )*) => {
        /// The CUDA expression of `f(a)` in `d`'s compute type.
        pub(crate) fn unary_expr(f: UnaryFn, d: DType, a: &str) -> String {
            let template = match f {
                $(UnaryFn::$V => {
                    let int: Option<&str> = None $(.or(Some($ci)))?;
                    match d {
                        // Never reached: bool inputs are rejected or promoted.
                        DType::Bool => "{a}",
                        _ if d.is_float() => $cf,
                        _ => int.unwrap_or("{a}"),
                    }
                })*
            };
            expand(template, d, a, "")
        }
    };
}
unary_op_table!(cuda_unary);

/// The CUDA expressions of the binary table's ops.
macro_rules! cuda_binary {
    (
        arith { $(
            $(#[$doc:meta])*
            $V:ident {
                $(method: $m:ident,)?
                $(inplace: $(#[$idoc:meta])* $ip:ident,)?
                $(named: $n:ident,)?
                dtypes: $rule:ident $(($msg:literal))?,
                scalar: $scalar:ident,
                cpu: |$a:ident, $b:ident| $cpu:expr,
                cuda: { bool: $cb:literal, float: $cf:literal, u8: $cu:literal, int: $ci:literal }
            }
        )* }
        compare { $(
            $(#[$cdoc:meta])*
            $C:ident { method: $cm:ident, cpu: |$ca:ident, $cb2:ident| $ccpu:expr, cuda: $cc:literal }
        )* }
    ) => {
        /// `a op b` for any op of the binary table in `d`'s compute type
        /// (comparisons give a C bool).
        pub(crate) fn arith(op: BinaryOp, d: DType, a: &str, b: &str) -> String {
            let template = match op {
                $(BinaryOp::$V => match d {
                    DType::Bool => $cb,
                    DType::U8 => $cu,
                    _ if d.is_float() => $cf,
                    _ => $ci,
                },)*
                $(BinaryOp::$C => $cc,)*
            };
            expand(template, d, a, b)
        }
    };
}
binary_op_table!(cuda_binary);

/// Body of `out = a op b` (both operands of dtype `d`; `b_scalar` when b is `prm` slot 0).
pub(crate) fn binary(op: BinaryOp, d: DType, b_scalar: bool) -> String {
    let c = compute_ty(d);
    let b = if b_scalar {
        scalar(d, 0)
    } else {
        load(d, "x2")
    };
    let out = if op.is_comparison() { DType::Bool } else { d };
    // With a scalar the op is that of the compute type (f32 for f16/bf16:
    // no `{r}` rounding of the steps), as the CPU's `E` (`ops::table`).
    let t = if b_scalar && matches!(d, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        d
    };
    format!(
        "const {c} a = {}; const {c} b = {b}; return {};",
        load(d, "x1"),
        store(out, &arith(op, t, "a", "b"))
    )
}

/// Body of `out = op(a)`.
pub(crate) fn unary(op: UnaryOp, d: DType) -> String {
    let c = compute_ty(d);
    let expr = match op {
        UnaryOp::Map(f) => unary_expr(f, d, "a"),
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

/// A double `c` converted to i64 as PyTorch's x86 CPU kernels do: truncated,
/// and `i64::MIN` where that is NaN or outside i64's range.
const F2I64: &str = "((c >= -9223372036854775808.0 && c < 9223372036854775808.0) ? (i64)c : (i64)0x8000000000000000ull)";

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
        // PyTorch's x86 CPU conversion, as the CPU backend's `float_to_i32` /
        // `float_to_i64`: truncated, and INT_MIN where NaN or out of range
        // (CUDA's own conversion saturates instead).
        (DType::I32, true) => {
            "((c > -2147483649.0 && c < 2147483648.0) ? (int)c : (int)0x80000000u)".to_string()
        }
        (DType::I64, true) => F2I64.to_string(),
        (DType::U8, true) => format!("(u8){F2I64}"),
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
    let sum = if d.is_float() {
        // `x + v * a * b` rounded once after `v * a`, as the CPU kernel and
        // PyTorch's (compiled to fma(v * a, b, x)); NVRTC runs with
        // --fmad=false, so the multiply-add is explicit.
        let fm = if d == DType::F64 { "fma" } else { "fmaf" };
        format!("{fm}(v * a, b, x)")
    } else {
        let prod = arith(BinaryOp::Mul, d, &arith(BinaryOp::Mul, d, "v", "a"), "b");
        arith(BinaryOp::Add, d, "x", &prod)
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_per_dtype() {
        assert_eq!(unary_expr(UnaryFn::Exp, DType::F32, "a"), "expf(a)");
        assert_eq!(unary_expr(UnaryFn::Exp, DType::F64, "a"), "exp(a)");
        assert_eq!(
            unary_expr(UnaryFn::Neg, DType::I64, "a"),
            "wneg<i64, u64>(a)"
        );
        assert_eq!(
            arith(BinaryOp::DivFloor, DType::BF16, "x", "y"),
            "divfloorf_bf(x, y)"
        );
        assert_eq!(
            arith(BinaryOp::DivFloor, DType::F32, "x", "y"),
            "divfloorf(x, y)"
        );
        assert_eq!(
            arith(BinaryOp::DivTrunc, DType::F16, "x", "y"),
            "truncf(rnd_h((x) / (y)))"
        );
        assert_eq!(
            arith(BinaryOp::DivTrunc, DType::F64, "x", "y"),
            "trunc(rnd((x) / (y)))"
        );
        // A scalar operand: the op of the compute type, unrounded.
        assert!(binary(BinaryOp::DivFloor, DType::BF16, true).contains("divfloorf(a, b)"));
        assert!(binary(BinaryOp::DivFloor, DType::BF16, false).contains("divfloorf_bf(a, b)"));
        assert!(binary(BinaryOp::DivTrunc, DType::F16, true).contains("truncf(rnd((a) / (b)))"));
        assert_eq!(
            arith(BinaryOp::Add, DType::I32, "x", "(v * a)"),
            "wadd<int, u32>(x, (v * a))"
        );
        assert_eq!(arith(BinaryOp::Lt, DType::U8, "a", "b"), "(a < b)");
        // An operand that itself contains a placeholder is not expanded again.
        assert_eq!(expand("({a} + {b})", DType::F32, "{b}", "q"), "({b} + q)");
    }
}
