//! The element-wise ops, each declared once.
//!
//! Each family is one table: a row gives the op's variant, its public
//! methods (with their docs), its dtype rule, its CPU expression and its CUDA
//! expression. The tables are "X-macros": every consumer passes the name of
//! its own macro and receives all rows, so each part is generated where it
//! belongs:
//!
//! * here: the op enums ([`UnaryFn`], [`BinaryOp`]) with their names and
//!   dtype rules;
//! * `ops::elementwise`: the public `Tensor` methods;
//! * `backend::cpu`: one monomorphised SIMD loop per op and dtype;
//! * `backend::cuda::kernels::ops`: the CUDA C expression per op and dtype.
//!
//! Adding an element-wise op is one row here (and its gradient in
//! strata-autograd).
//!
//! # Row grammar
//!
//! Unary (`unary_op_table!`):
//! ```text
//! /// doc of the out-of-place method
//! Variant { method: name, [inplace: /// doc  name_,] dtypes: Rule,
//!           cpu: |x| expr, cuda: { float: "C", [int: "C"] } }
//! ```
//! `cpu` maps the input, widened to the compute type (`Element::Acc`, f32 for
//! f16/bf16), to the result in that type; the `Arith` methods and, for
//! float-only ops, `f32`/`f64`'s own methods are in scope. The CUDA
//! expressions are C templates: `{a}` the operand in the compute type, `{c}`
//! the compute type, `{u}` the unsigned type integer arithmetic wraps in,
//! `{f}` the `f` suffix of single-precision math functions (`exp{f}` is
//! `expf` for f32/f16/bf16, `exp` for f64). `int` serves the integer dtypes
//! (it may be left out by float-only ops).
//!
//! Rules ([`UnaryDTypes`]): `All`; `NotBool` (bool input is an error);
//! `Float` (integer inputs compute in f32; in place needs a float tensor);
//! `FloatOnly` (integer and bool inputs are an error).
//!
//! A row may have `named: name` instead of `method: name`: it gets no
//! generated method (its public method, taking an argument that picks the
//! row, is written by hand; `gelu`'s approximation) and `name` in errors.
//!
//! Binary (`binary_op_table!`): an `arith { .. }` section whose rows write the
//! operands' dtype and a `compare { .. }` section whose rows write bool:
//! ```text
//! Variant { [method: name,] [inplace: /// doc  name_,] dtypes: BinaryDTypes::X,
//!           scalar: Elem | Acc, cpu: |a, b| expr,
//!           cuda: { bool: "C", float: "C", u8: "C", int: "C" } }
//! Variant { method: name, cpu: |a, b| expr, cuda: "C" }       // compare
//! ```
//! `scalar` says how a scalar operand enters: `Elem` rounds it to the tensor's
//! dtype first (PyTorch's rule for add, sub and comparisons), `Acc` keeps it at
//! the compute type's precision (mul, div). CUDA templates use `{a}`, `{b}`.
//!
//! A binary `cpu` expression may name `E`, the element type whose arithmetic
//! the op follows (`E::div_trunc_elem`): the operands' dtype for two
//! tensors, the compute type (`Element::Acc`) for a scalar operand, as
//! PyTorch's f16/bf16 kernels with a scalar divisor compute in f32. The CUDA
//! templates' `{r}` is the matching suffix: `_h` / `_bf` for two f16 / bf16
//! tensors (`rnd_bf(x)` rounds x to bf16, `divfloorf_bf` rounds every step),
//! empty otherwise (`rnd(x)` is x).

/// The unary element-wise ops.
macro_rules! unary_op_table {
    ($m:ident) => {
        $m! {
            /// `-self` (not for bool).
            Neg {
                method: neg,
                inplace: /// In place `-self`.
                    neg_,
                dtypes: NotBool,
                cpu: |x| x.neg(),
                cuda: { float: "(-{a})", int: "wneg<{c}, {u}>({a})" }
            }
            /// `max(self, 0)` (NaN propagates).
            Relu {
                method: relu,
                inplace: /// In place `max(self, 0)`.
                    relu_,
                dtypes: NotBool,
                cpu: |x| $crate::ops::table::relu(x),
                cuda: { float: "({a} < ({c})0 ? ({c})0 : {a})", int: "({a} < ({c})0 ? ({c})0 : {a})" }
            }
            /// `e^self` (integer input gives f32).
            Exp {
                method: exp,
                inplace: /// In place `e^self` (float tensors only).
                    exp_,
                dtypes: Float,
                cpu: |x| x.exp(),
                cuda: { float: "exp{f}({a})" }
            }
            /// Natural logarithm (integer input gives f32).
            Log {
                method: log,
                dtypes: Float,
                cpu: |x| x.ln(),
                cuda: { float: "log{f}({a})" }
            }
            // ----- issue 12: elementwise math (see `ops::math`) -----
            /// Square root, correctly rounded in every float dtype (integer input gives f32).
            Sqrt {
                method: sqrt,
                inplace: /// In place square root (float tensors only).
                    sqrt_,
                dtypes: Float,
                cpu: |x| x.sqrt_(),
                cuda: { float: "sqrt{f}({a})" }
            }
            /// `1 / sqrt(self)` (`rsqrt(-0.0)` is `-inf`; integer input gives f32).
            Rsqrt {
                method: rsqrt,
                inplace: /// In place `1 / sqrt(self)` (float tensors only).
                    rsqrt_,
                dtypes: Float,
                cpu: |x| x.rsqrt_(),
                cuda: { float: "(({c})1 / sqrt{f}({a}))" }
            }
            /// `|self|`, keeping the dtype (integers wrap at their minimum; bool is an error).
            Abs {
                method: abs,
                inplace: /// In place `|self|`.
                    abs_,
                dtypes: NotBool,
                cpu: |x| x.abs_(),
                cuda: { float: "fabs{f}({a})", int: "({a} < ({c})0 ? wneg<{c}, {u}>({a}) : {a})" }
            }
            /// Hyperbolic tangent (integer input gives f32).
            Tanh {
                method: tanh,
                inplace: /// In place hyperbolic tangent (float tensors only).
                    tanh_,
                dtypes: Float,
                cpu: |x| x.tanh_(),
                cuda: { float: "tanh{f}({a})" }
            }
            /// `1 / (1 + e^-self)` (integer input gives f32).
            Sigmoid {
                method: sigmoid,
                inplace: /// In place sigmoid (float tensors only).
                    sigmoid_,
                dtypes: Float,
                cpu: |x| x.sigmoid_(),
                cuda: { float: "(({c})1 / (({c})1 + exp{f}(-{a})))" }
            }
            /// `self * sigmoid(self)` (float tensors only; `silu(-inf)` is NaN, as in PyTorch).
            Silu {
                method: silu,
                inplace: /// In place SiLU (`F.silu(x, inplace=True)`).
                    silu_,
                dtypes: FloatOnly,
                cpu: |x| x.silu_(),
                cuda: { float: "({a} / (({c})1 + exp{f}(-{a})))" }
            }
            /// Exact GELU, `x / 2 * (1 + erf(x / sqrt 2))` ([`Tensor::gelu`]).
            Gelu {
                named: gelu,
                dtypes: FloatOnly,
                // f16/bf16: PyTorch's CPU kernel computes in f32 with its
                // vectorised erf (`Math::gelu_vec_`); `Tensor::gelu` then
                // recomputes the elements its scalar loop takes. f32:
                // oneDNN's kernel, which PyTorch calls for a contiguous
                // tensor of two elements or more (`Math::gelu_onednn_`);
                // `Tensor::gelu` takes `GeluVec` and `GeluScalar` for the
                // others.
                cpu: |x| match T::DTYPE {
                    DType::F16 | DType::BF16 => x.gelu_vec_(),
                    DType::F32 => x.gelu_onednn_(),
                    _ => x.gelu_(),
                },
                cuda: { float: "(({c})0.5 * {a} * (({c})1 + erf{f}({a} * ({c})0.70710678118654752440)))" }
            }
            /// Exact GELU as PyTorch's CPU `GeluKernelImpl` computes it in
            /// its vectorised loop (`Math::gelu_vec_`; f64: `Math::gelu_`),
            /// for [`Tensor::gelu`] only.
            GeluVec {
                named: gelu,
                dtypes: FloatOnly,
                cpu: |x| if T::DTYPE == DType::F64 { x.gelu_() } else { x.gelu_vec_() },
                cuda: { float: "(({c})0.5 * {a} * (({c})1 + erf{f}({a} * ({c})0.70710678118654752440)))" }
            }
            /// Exact GELU as PyTorch's CPU `GeluKernelImpl` computes it in
            /// its scalar functor (`Math::gelu_scalar_`: the C library's
            /// `erff` in f32), for [`Tensor::gelu`] only.
            GeluScalar {
                named: gelu,
                dtypes: FloatOnly,
                cpu: |x| x.gelu_scalar_(),
                cuda: { float: "(({c})0.5 * {a} * (({c})1 + erf{f}({a} * ({c})0.70710678118654752440)))" }
            }
            /// GELU's tanh approximation ([`Tensor::gelu`]).
            GeluTanh {
                named: gelu,
                dtypes: FloatOnly,
                cpu: |x| x.gelu_tanh_(),
                cuda: { float: "(({c})0.5 * {a} * (({c})1 + tanh{f}(({c})0.79788456080286535588 * ({a} + ({c})0.044715 * {a} * {a} * {a}))))" }
            }
            /// Sine (integer input gives f32).
            Sin {
                method: sin,
                inplace: /// In place sine (float tensors only).
                    sin_,
                dtypes: Float,
                cpu: |x| x.sin_(),
                cuda: { float: "sin{f}({a})" }
            }
            /// Cosine (integer input gives f32).
            Cos {
                method: cos,
                inplace: /// In place cosine (float tensors only).
                    cos_,
                dtypes: Float,
                cpu: |x| x.cos_(),
                cuda: { float: "cos{f}({a})" }
            }
            /// The error function (integer input gives f32).
            Erf {
                method: erf,
                inplace: /// In place error function (float tensors only).
                    erf_,
                dtypes: Float,
                // f16/bf16: PyTorch's CPU kernel computes in f32 with its
                // vectorised erf (`Math::erf_vec_`), on every element.
                cpu: |x| if matches!(T::DTYPE, DType::F16 | DType::BF16) { x.erf_vec_() } else { x.erf_() },
                cuda: { float: "erf{f}({a})" }
            }
            /// `ln(1 + self)`, accurate near 0 (integer input gives f32).
            Log1p {
                method: log1p,
                inplace: /// In place `ln(1 + self)` (float tensors only).
                    log1p_,
                dtypes: Float,
                cpu: |x| x.log1p_(),
                cuda: { float: "log1p{f}({a})" }
            }
            /// `e^self - 1`, accurate near 0 (integer input gives f32).
            Expm1 {
                method: expm1,
                inplace: /// In place `e^self - 1` (float tensors only).
                    expm1_,
                dtypes: Float,
                cpu: |x| x.expm1_(),
                cuda: { float: "expm1{f}({a})" }
            }
            /// `1 / self`, correctly rounded in every float dtype (integer input gives f32).
            Reciprocal {
                method: reciprocal,
                inplace: /// In place `1 / self` (float tensors only).
                    reciprocal_,
                dtypes: Float,
                cpu: |x| x.recip_(),
                cuda: { float: "(({c})1 / {a})" }
            }
            /// -1, 0 or 1 in the input's dtype (`sign(NaN)` and `sign(-0.0)` are
            /// +0.0, as in PyTorch; bool gives itself).
            Sign {
                method: sign,
                inplace: /// In place sign.
                    sign_,
                dtypes: All,
                cpu: |x| x.sign_(),
                cuda: {
                    float: "(({a} > ({c})0) ? ({c})1 : (({a} < ({c})0) ? ({c})-1 : ({c})0))",
                    int: "(({a} > ({c})0) ? ({c})1 : (({a} < ({c})0) ? ({c})-1 : ({c})0))"
                }
            }
            // ----- session 74: the rest of PyTorch's element-wise math (see `ops::math`) -----
            /// Tangent (integer and bool input gives f32).
            Tan {
                method: tan,
                inplace: /// In place tangent (float tensors only).
                    tan_,
                dtypes: Float,
                cpu: |x| x.tan_(),
                cuda: { float: "tan{f}({a})" }
            }
            /// Arcsine (NaN outside [-1, 1]) (integer and bool input gives f32).
            Asin {
                method: asin,
                inplace: /// In place arcsine (float tensors only).
                    asin_,
                dtypes: Float,
                cpu: |x| x.asin_(),
                cuda: { float: "asin{f}({a})" }
            }
            /// Arccosine (NaN outside [-1, 1]) (integer and bool input gives f32).
            Acos {
                method: acos,
                inplace: /// In place arccosine (float tensors only).
                    acos_,
                dtypes: Float,
                cpu: |x| x.acos_(),
                cuda: { float: "acos{f}({a})" }
            }
            /// Arctangent (integer and bool input gives f32).
            Atan {
                method: atan,
                inplace: /// In place arctangent (float tensors only).
                    atan_,
                dtypes: Float,
                cpu: |x| x.atan_(),
                cuda: { float: "atan{f}({a})" }
            }
            /// Hyperbolic sine (integer and bool input gives f32).
            Sinh {
                method: sinh,
                inplace: /// In place hyperbolic sine (float tensors only).
                    sinh_,
                dtypes: Float,
                cpu: |x| x.sinh_(),
                cuda: { float: "sinh{f}({a})" }
            }
            /// Hyperbolic cosine (integer and bool input gives f32).
            Cosh {
                method: cosh,
                inplace: /// In place hyperbolic cosine (float tensors only).
                    cosh_,
                dtypes: Float,
                cpu: |x| x.cosh_(),
                cuda: { float: "cosh{f}({a})" }
            }
            /// Inverse hyperbolic sine (integer and bool input gives f32).
            Asinh {
                method: asinh,
                inplace: /// In place inverse hyperbolic sine (float tensors only).
                    asinh_,
                dtypes: Float,
                cpu: |x| x.asinh_(),
                cuda: { float: "asinh{f}({a})" }
            }
            /// Inverse hyperbolic cosine (NaN below 1) (integer and bool input gives f32).
            Acosh {
                method: acosh,
                inplace: /// In place inverse hyperbolic cosine (float tensors only).
                    acosh_,
                dtypes: Float,
                cpu: |x| x.acosh_(),
                cuda: { float: "acosh{f}({a})" }
            }
            /// Inverse hyperbolic tangent (±inf at ±1, NaN outside [-1, 1]) (integer and bool input gives f32).
            Atanh {
                method: atanh,
                inplace: /// In place inverse hyperbolic tangent (float tensors only).
                    atanh_,
                dtypes: Float,
                cpu: |x| x.atanh_(),
                cuda: { float: "atanh{f}({a})" }
            }
            /// Base-2 logarithm (integer and bool input gives f32).
            Log2 {
                method: log2,
                inplace: /// In place base-2 logarithm (float tensors only).
                    log2_,
                dtypes: Float,
                cpu: |x| x.log2_(),
                cuda: { float: "log2{f}({a})" }
            }
            /// Base-10 logarithm (integer and bool input gives f32).
            Log10 {
                method: log10,
                inplace: /// In place base-10 logarithm (float tensors only).
                    log10_,
                dtypes: Float,
                cpu: |x| x.log10_(),
                cuda: { float: "log10{f}({a})" }
            }
            /// `2^self` (integer and bool input gives f32).
            Exp2 {
                method: exp2,
                inplace: /// In place `2^self` (float tensors only).
                    exp2_,
                dtypes: Float,
                cpu: |x| x.exp2_(),
                cuda: { float: "exp2{f}({a})" }
            }
            /// The complementary error function `1 - erf(self)`, accurate where `erf` is near 1 (integer and bool input gives f32).
            Erfc {
                method: erfc,
                inplace: /// In place `1 - erf(self)` (float tensors only).
                    erfc_,
                dtypes: Float,
                cpu: |x| x.erfc_(),
                cuda: { float: "erfc{f}({a})" }
            }
            /// The largest integer not above each element (`torch.floor`; integers are kept, bool is an error).
            Floor {
                method: floor,
                inplace: /// In place floor.
                    floor_,
                dtypes: NotBool,
                cpu: |x| x.floor_(),
                cuda: { float: "floor{f}({a})" }
            }
            /// The smallest integer not below each element (`torch.ceil`; integers are kept, bool is an error).
            Ceil {
                method: ceil,
                inplace: /// In place ceil.
                    ceil_,
                dtypes: NotBool,
                cpu: |x| x.ceil_(),
                cuda: { float: "ceil{f}({a})" }
            }
            /// Each element rounded to the nearest integer, halves to even (`torch.round`; integers are kept, bool is an error).
            Round {
                method: round,
                inplace: /// In place round.
                    round_,
                dtypes: NotBool,
                cpu: |x| x.round_(),
                cuda: { float: "rint{f}({a})" }
            }
            /// Each element rounded toward zero (`torch.trunc`, `torch.fix`; integers are kept, bool is an error).
            Trunc {
                method: trunc,
                inplace: /// In place trunc.
                    trunc_,
                dtypes: NotBool,
                cpu: |x| x.trunc_(),
                cuda: { float: "trunc{f}({a})" }
            }
            /// `self - trunc(self)`, with the sign of self (`torch.frac`; float tensors only).
            Frac {
                method: frac,
                inplace: /// In place `self - trunc(self)`.
                    frac_,
                dtypes: FloatOnly,
                cpu: |x| x.frac_(),
                cuda: { float: "({a} - trunc{f}({a}))" }
            }
            // ----- session 79: special functions (see `ops::special`, `ops::special_math`) -----
            /// The inverse error function (`Tensor::erfinv`).
            Erfinv {
                named: erfinv,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::erfinv_(x),
                cuda: { float: "erfinv{f}({a})" }
            }
            /// `ln |Gamma(x)|` (`Tensor::lgamma`).
            Lgamma {
                named: lgamma,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::lgamma_(x),
                cuda: { float: "lgamma{f}({a})" }
            }
            /// The digamma function (`Tensor::digamma`).
            Digamma {
                named: digamma,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::digamma_(x),
                cuda: { float: "sp_digamma<{c}>({a})" }
            }
            /// The trigamma function (`Tensor::polygamma` with n = 1).
            Trigamma {
                named: polygamma,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::trigamma_(x),
                cuda: { float: "sp_trigamma<{c}>({a})" }
            }
            /// The modified Bessel function `I0` (`Tensor::i0`).
            I0 {
                named: i0,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::i0_(x),
                cuda: { float: "sp_i0<{c}>({a})" }
            }
            /// `exp(-|x|) I0(x)` (`Tensor::special_i0e`).
            I0e {
                named: special_i0e,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::i0e_(x),
                cuda: { float: "sp_i0e<{c}>({a})" }
            }
            /// The modified Bessel function `I1` (`Tensor::special_i1`).
            I1 {
                named: special_i1,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::i1_(x),
                cuda: { float: "sp_i1<{c}>({a})" }
            }
            /// `exp(-|x|) I1(x)` (`Tensor::special_i1e`).
            I1e {
                named: special_i1e,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::i1e_(x),
                cuda: { float: "sp_i1e<{c}>({a})" }
            }
            /// `sin(pi x) / (pi x)` (`Tensor::sinc`).
            Sinc {
                named: sinc,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::sinc_(x),
                cuda: { float: "sp_sinc<{c}>({a})" }
            }
            /// `-x ln x` (`Tensor::special_entr`).
            Entr {
                named: special_entr,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::entr_(x, T::DTYPE),
                cuda: { float: "sp_entr<{c}>({a})" }
            }
            /// The standard normal distribution function (`Tensor::special_ndtr`).
            Ndtr {
                named: special_ndtr,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::ndtr_(x, T::DTYPE),
                cuda: { float: "(({c})0.5 * erfc{f}(-{a} * ({c})0.70710678118654752440))" }
            }
            /// The inverse of the standard normal distribution function (`Tensor::special_ndtri`).
            Ndtri {
                named: special_ndtri,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::ndtri_(x),
                cuda: { float: "normcdfinv{f}({a})" }
            }
            /// The log of the standard normal distribution function (`Tensor::special_log_ndtr`).
            LogNdtr {
                named: special_log_ndtr,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::log_ndtr_(x),
                cuda: { float: "sp_log_ndtr<{c}>({a})" }
            }
            /// `exp(x^2) erfc(x)` (`Tensor::special_erfcx`).
            Erfcx {
                named: special_erfcx,
                dtypes: Float,
                cpu: |x| $crate::ops::special_math::Special::erfcx_(x),
                cuda: { float: "erfcx{f}({a})" }
            }
            /// The mantissa of `frexp` (`Tensor::frexp`).
            FrexpMantissa {
                named: frexp,
                dtypes: FloatOnly,
                cpu: |x| $crate::ops::special_math::Special::frexp_mantissa_(x),
                cuda: { float: "sp_frexp_m<{c}>({a})" }
            }
            /// The exponent of `frexp` as a value of the input's dtype (`Tensor::frexp`).
            FrexpExponent {
                named: frexp,
                dtypes: FloatOnly,
                cpu: |x| $crate::ops::special_math::Special::frexp_exponent_(x),
                cuda: { float: "sp_frexp_e<{c}>({a})" }
            }
        }
    };
}
pub(crate) use unary_op_table;

/// The binary element-wise ops.
macro_rules! binary_op_table {
    ($m:ident) => {
        $m! {
            arith {
                /// `self + b`, broadcasting, with PyTorch's type promotion.
                ///
                /// ```
                /// use strata_tensor::{Tensor, Device, DType};
                /// let a = Tensor::from_slice(&[1i32, 2, 3], &[3], Device::Cpu).unwrap();
                /// assert_eq!(a.add(2).unwrap().dtype(), DType::I32);
                /// assert_eq!(a.add(0.5).unwrap().to_vec::<f32>().unwrap(), vec![1.5, 2.5, 3.5]);
                /// ```
                Add {
                    method: add,
                    inplace:
                        /// In place: `self += b` (b broadcasts to self's shape; self never broadcasts).
                        ///
                        /// ```
                        /// use strata_tensor::{Tensor, Device, DType};
                        /// let a = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu).unwrap();
                        /// let row = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
                        /// a.add_(&row).unwrap();
                        /// assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
                        /// assert!(row.add_(&a).is_err()); // [3] cannot hold a [2, 3] result
                        /// ```
                        add_,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| a.add(b),
                    cuda: {
                        bool: "({a} | {b})",
                        float: "({a} + {b})",
                        u8: "((u8)({a} + {b}))",
                        int: "wadd<{c}, {u}>({a}, {b})"
                    }
                }
                /// `self - b`.
                Sub {
                    method: sub,
                    inplace: /// In place: `self -= b`.
                        sub_,
                    dtypes: NoBoolOperand("subtraction with a bool operand is not supported; use logical ops"),
                    scalar: Elem,
                    cpu: |a, b| a.sub(b),
                    cuda: {
                        bool: "({a} ^ {b})",
                        float: "({a} - {b})",
                        u8: "((u8)({a} - {b}))",
                        int: "wsub<{c}, {u}>({a}, {b})"
                    }
                }
                /// `self * b`.
                Mul {
                    method: mul,
                    inplace: /// In place: `self *= b`.
                        mul_,
                    dtypes: All,
                    scalar: Acc,
                    cpu: |a, b| a.mul(b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "({a} * {b})",
                        u8: "((u8)((u32){a} * (u32){b}))",
                        int: "wmul<{c}, {u}>({a}, {b})"
                    }
                }
                /// True division `self / b` (integer inputs give f32).
                Div {
                    method: div,
                    inplace: /// In place: `self /= b` (true division; self must be a float tensor).
                        div_,
                    dtypes: Float,
                    scalar: Acc,
                    cpu: |a, b| a.div(b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "({a} / {b})",
                        u8: "udiv({a}, {b})",
                        int: "sdiv<{c}, {u}>({a}, {b})"
                    }
                }
                /// Division rounded toward zero (`Tensor::div_mode`). For two
                /// f16/bf16 tensors the quotient is rounded to the dtype before
                /// it is truncated; a scalar's quotient is truncated in f32.
                DivTrunc {
                    named: div,
                    dtypes: NoBoolCompute,
                    scalar: Acc,
                    cpu: |a, b| E::div_trunc_elem(a, b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "trunc{f}(rnd{r}(({a}) / ({b})))",
                        u8: "udiv({a}, {b})",
                        int: "sdiv<{c}, {u}>({a}, {b})"
                    }
                }
                /// Division rounded toward negative infinity (`Tensor::div_mode`).
                /// For two f16/bf16 tensors every step of PyTorch's algorithm
                /// is rounded to the dtype; for a scalar it runs in f32.
                DivFloor {
                    named: div,
                    dtypes: NoBoolCompute,
                    scalar: Acc,
                    cpu: |a, b| E::div_floor_elem(a, b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "divfloor{f}{r}({a}, {b})",
                        u8: "udiv({a}, {b})",
                        int: "sdivfloor<{c}, {u}>({a}, {b})"
                    }
                }
                // ----- issue 12: elementwise math (see `ops::math`) -----
                /// `self ^ b` (`torch.pow`), broadcasting, with the promotion of `mul`.
                /// Integer results wrap; an integer tensor to a negative int
                /// scalar is an error, while negative integer tensor exponents
                /// give the truncated `1 / self^n`. A scalar exponent of 0.5 or
                /// -0.5 is computed as `sqrt`/`rsqrt` (PyTorch's quirk); other
                /// float exponents follow C's `pow`. An f16 or bf16 tensor takes
                /// a scalar exponent converted to its dtype, as PyTorch's kernels
                /// do (`pow(2.2)` of f16 is `^ 2.19921875`). For a scalar base
                /// see [`Tensor::scalar_pow`].
                ///
                /// ```
                /// use strata_tensor::{Tensor, Device};
                /// let a = Tensor::from_slice(&[2i32, 3], &[2], Device::Cpu).unwrap();
                /// assert_eq!(a.pow(3).unwrap().to_vec::<i32>().unwrap(), vec![8, 27]);
                /// assert!(a.pow(-1).is_err());
                /// ```
                Pow {
                    method: pow,
                    inplace: /// In place `self ^ b` (b broadcasts to self's shape).
                        pow_,
                    dtypes: NoBoolCompute,
                    scalar: Acc,
                    cpu: |a, b| a.pow_(b),
                    cuda: {
                        bool: "({a} | !{b})",
                        float: "pow{f}({a}, {b})",
                        u8: "ipow<u8, u32>({a}, {b})",
                        int: "ipow<{c}, {u}>({a}, {b})"
                    }
                }
                /// Element-wise maximum (`torch.maximum`), broadcasting and
                /// promoting like `add`; NaN in either operand gives NaN.
                Maximum {
                    method: maximum,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| a.maximum_(b),
                    cuda: {
                        bool: "({a} | {b})",
                        float: "max_nan<{c}>({a}, {b})",
                        u8: "({a} > {b} ? {a} : {b})",
                        int: "({a} > {b} ? {a} : {b})"
                    }
                }
                /// `g * gelu'(x)` for the gradient `g` and GELU's input `x`
                /// ([`Tensor::gelu_backward`], exact form).
                GeluBackward {
                    named: gelu_backward,
                    dtypes: Float,
                    scalar: Acc,
                    cpu: |a, b| a.mul(b.gelu_grad_()),
                    cuda: {
                        bool: "({a})",
                        float: "({a} * ((({c})0.5 * (({c})1 + erf{f}({b} * ({c})0.70710678118654752440))) + {b} * ({c})0.39894228040143267794 * exp{f}(({c})-0.5 * {b} * {b})))",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// `g * gelu_tanh'(x)` ([`Tensor::gelu_backward`], tanh form; PyTorch's formula).
                GeluTanhBackward {
                    named: gelu_backward,
                    dtypes: Float,
                    scalar: Acc,
                    cpu: |a, b| a.mul(b.gelu_tanh_grad_()),
                    cuda: {
                        bool: "({a})",
                        float: "gelu_tanh_grad<{c}>({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// Element-wise minimum (`torch.minimum`); NaN in either operand gives NaN.
                Minimum {
                    method: minimum,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| a.minimum_(b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "min_nan<{c}>({a}, {b})",
                        u8: "({a} < {b} ? {a} : {b})",
                        int: "({a} < {b} ? {a} : {b})"
                    }
                }

                // ----- session 74 (see `ops::math`) -----
                /// `atan2(self, b)` (`torch.atan2`): the angle of the point
                /// `(b, self)` in `[-pi, pi]`, broadcasting; integer and bool
                /// inputs give f32.
                ///
                /// ```
                /// use strata_tensor::{Tensor, Device};
                /// let y = Tensor::from_slice(&[1.0f32, -1.0], &[2], Device::Cpu).unwrap();
                /// let x = Tensor::from_slice(&[0.0f32, -1.0], &[2], Device::Cpu).unwrap();
                /// let a = y.atan2(&x).unwrap().to_vec::<f32>().unwrap();
                /// assert_eq!(a, vec![std::f32::consts::FRAC_PI_2, -3.0 * std::f32::consts::FRAC_PI_4]);
                /// ```
                Atan2 {
                    method: atan2,
                    inplace: /// In place `atan2(self, b)` (self must be a float tensor).
                        atan2_,
                    dtypes: Float,
                    scalar: Elem,
                    cpu: |a, b| a.atan2_(b),
                    cuda: {
                        bool: "({a})",
                        float: "atan2{f}({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// Python's `self % b` (`torch.remainder`): the remainder of
                /// floor division, with the sign of `b` (`remainder(-3, 5)` is
                /// 2), broadcasting and promoting like `add`. An integer
                /// divisor of 0 is an error, as on PyTorch's CPU; a float
                /// one gives NaN.
                ///
                /// ```
                /// use strata_tensor::{Tensor, Device};
                /// let a = Tensor::from_slice(&[-3i64, 7], &[2], Device::Cpu).unwrap();
                /// assert_eq!(a.remainder(5).unwrap().to_vec::<i64>().unwrap(), vec![2, 2]);
                /// assert_eq!(a.fmod(5).unwrap().to_vec::<i64>().unwrap(), vec![-3, 2]);
                /// assert!(a.remainder(0).is_err());
                /// ```
                Remainder {
                    method: remainder,
                    inplace: /// In place `self % b`.
                        remainder_,
                    dtypes: NoBoolCompute,
                    scalar: Elem,
                    cpu: |a, b| a.rem_(b),
                    cuda: {
                        bool: "({a})",
                        float: "pyrem{f}({a}, {b})",
                        u8: "irem<u8>({a}, {b})",
                        int: "irem<{c}>({a}, {b})"
                    }
                }
                /// C's `fmod(self, b)` (`torch.fmod`): the remainder of
                /// truncating division, with the sign of self, broadcasting and
                /// promoting like `add`. An integer divisor of 0 is an error, as
                /// on PyTorch's CPU; a float one gives NaN.
                Fmod {
                    method: fmod,
                    inplace: /// In place `fmod(self, b)`.
                        fmod_,
                    dtypes: NoBoolCompute,
                    scalar: Elem,
                    cpu: |a, b| a.fmod_(b),
                    cuda: {
                        bool: "({a})",
                        float: "fmod{f}({a}, {b})",
                        u8: "ifmod<u8>({a}, {b})",
                        int: "ifmod<{c}>({a}, {b})"
                    }
                }
                // ----- session 79 (see `ops::special`, `ops::special_math`) -----
                /// `sqrt(a^2 + b^2)` (`Tensor::hypot`; floats only, checked there).
                Hypot {
                    named: hypot,
                    dtypes: Float,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::hypot_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "hypot{f}({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// `|a|` with the sign of `b` (`Tensor::copysign`).
                Copysign {
                    named: copysign,
                    dtypes: Float,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::copysign_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "copysign{f}({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// The next value after `a` toward `b` in the operands' dtype (`Tensor::nextafter`).
                Nextafter {
                    named: nextafter,
                    dtypes: Float,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::nextafter_(a, b, E::DTYPE),
                    cuda: {
                        bool: "({a})",
                        float: "sp_nextafter{f}{r}({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// `max(a, b)` ignoring a NaN operand (`Tensor::fmax`).
                Fmax {
                    named: fmax,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::fmax_(a, b),
                    cuda: {
                        bool: "({a} | {b})",
                        float: "fmax{f}({a}, {b})",
                        u8: "({a} > {b} ? {a} : {b})",
                        int: "({a} > {b} ? {a} : {b})"
                    }
                }
                /// `min(a, b)` ignoring a NaN operand (`Tensor::fmin`).
                Fmin {
                    named: fmin,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::fmin_(a, b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "fmin{f}({a}, {b})",
                        u8: "({a} < {b} ? {a} : {b})",
                        int: "({a} < {b} ? {a} : {b})"
                    }
                }
                /// `a ln(1 + b)`, 0 where `a` is 0 (`Tensor::xlog1py`).
                Xlog1py {
                    named: xlog1py,
                    dtypes: Float,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::xlog1py_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "sp_xlog1py<{c}>({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// `torch.bitwise_and(self, b)` (`self & b`; logical and for
                /// bool): integer and bool dtypes only, with PyTorch's type
                /// promotion (`bool & u8` is u8, a bool tensor `& 3` is i64).
                ///
                /// ```
                /// use strata_tensor::{Device, Tensor};
                /// let a = Tensor::from_slice(&[12i32, -1, 5], &[3], Device::Cpu)?;
                /// assert_eq!(a.bitwise_and(10)?.to_vec::<i32>()?, [8, 10, 0]);
                /// assert_eq!((&a | 3)?.to_vec::<i32>()?, [15, -1, 7]);
                /// assert_eq!(a.bitwise_not()?.to_vec::<i32>()?, [-13, 0, -6]);
                /// assert!(a.to_dtype(strata_tensor::DType::F32)?.bitwise_and(1).is_err());
                /// # Ok::<(), strata_tensor::TensorError>(())
                /// ```
                BitAnd {
                    method: bitwise_and,
                    inplace: /// In place `self & b` (the result must be castable to self's dtype).
                        bitwise_and_,
                    dtypes: Integral,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::bitand_(a, b),
                    cuda: {
                        bool: "({a} & {b})",
                        float: "({a})",
                        u8: "({a} & {b})",
                        int: "({a} & {b})"
                    }
                }
                /// `torch.bitwise_or(self, b)` (`self | b`), as
                /// [`bitwise_and`](Tensor::bitwise_and).
                BitOr {
                    method: bitwise_or,
                    inplace: /// In place `self | b`.
                        bitwise_or_,
                    dtypes: Integral,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::bitor_(a, b),
                    cuda: {
                        bool: "({a} | {b})",
                        float: "({a})",
                        u8: "({a} | {b})",
                        int: "({a} | {b})"
                    }
                }
                /// `torch.bitwise_xor(self, b)` (`self ^ b`), as
                /// [`bitwise_and`](Tensor::bitwise_and).
                BitXor {
                    method: bitwise_xor,
                    inplace: /// In place `self ^ b`.
                        bitwise_xor_,
                    dtypes: Integral,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::bitxor_(a, b),
                    cuda: {
                        bool: "({a} ^ {b})",
                        float: "({a})",
                        u8: "({a} ^ {b})",
                        int: "({a} ^ {b})"
                    }
                }
                /// The greatest common divisor (`Tensor::gcd`; integers only, checked there).
                Gcd {
                    named: gcd,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::gcd_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "({a})",
                        u8: "sp_gcd<u8>({a}, {b})",
                        int: "sp_gcd<{c}>({a}, {b})"
                    }
                }
                /// The least common multiple (`Tensor::lcm`; integers only, checked there).
                Lcm {
                    named: lcm,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::lcm_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "({a})",
                        u8: "sp_lcm<u8>({a}, {b})",
                        int: "sp_lcm<{c}>({a}, {b})"
                    }
                }
                /// `a << b` (`Tensor::bitwise_left_shift`; integers only, checked there).
                ShiftLeft {
                    named: bitwise_left_shift,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::shl_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "({a})",
                        u8: "sp_shl<u8>({a}, {b})",
                        int: "sp_shl<{c}>({a}, {b})"
                    }
                }
                /// `a >> b` (`Tensor::bitwise_right_shift`; integers only, checked there).
                ShiftRight {
                    named: bitwise_right_shift,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::shr_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "({a})",
                        u8: "sp_shr<u8>({a}, {b})",
                        int: "sp_shr<{c}>({a}, {b})"
                    }
                }
                /// `b` where `a` is 0, else `a > 0` (`Tensor::heaviside`).
                Heaviside {
                    named: heaviside,
                    dtypes: All,
                    scalar: Elem,
                    cpu: |a, b| $crate::ops::special_math::Special::heaviside_(a, b),
                    cuda: {
                        bool: "({a} ? true : {b})",
                        float: "({a} == ({c})0 ? {b} : ({a} > ({c})0 ? ({c})1 : ({c})0))",
                        u8: "({a} == 0 ? {b} : (u8)1)",
                        int: "({a} == ({c})0 ? {b} : ({a} > ({c})0 ? ({c})1 : ({c})0))"
                    }
                }
                /// The Hurwitz zeta function `zeta(b, a)` (`Tensor::polygamma` with n >= 2: `b` is `n + 1`).
                Zeta {
                    named: polygamma,
                    dtypes: Float,
                    scalar: Acc,
                    cpu: |a, b| $crate::ops::special_math::Special::zeta_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "sp_zeta<{c}>({b}, {a})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
                /// `ln(z / (1 - z))` of `a` clamped to `[b, 1 - b]` (no clamp for `b < 0`) (`Tensor::logit`).
                Logit {
                    named: logit,
                    dtypes: Float,
                    scalar: Acc,
                    cpu: |a, b| $crate::ops::special_math::Special::logit_(a, b),
                    cuda: {
                        bool: "({a})",
                        float: "sp_logit<{c}>({a}, {b})",
                        u8: "({a})",
                        int: "({a})"
                    }
                }
            }
            compare {
                /// `self == b` element-wise (bool result).
                Eq { method: eq, cpu: |a, b| a == b, cuda: "({a} == {b})" }
                /// `self != b`.
                Ne { method: ne, cpu: |a, b| a != b, cuda: "({a} != {b})" }
                /// `self < b`.
                Lt { method: lt, cpu: |a, b| a < b, cuda: "({a} < {b})" }
                /// `self <= b`.
                Le { method: le, cpu: |a, b| a <= b, cuda: "({a} <= {b})" }
                /// `self > b`.
                Gt { method: gt, cpu: |a, b| a > b, cuda: "({a} > {b})" }
                /// `self >= b`.
                Ge { method: ge, cpu: |a, b| a >= b, cuda: "({a} >= {b})" }
            }
        }
    };
}
pub(crate) use binary_op_table;

/// `max(v, 0)` with NaN propagating and `-0.0` kept (the CPU side of `Relu`).
#[inline(always)]
pub(crate) fn relu<A: crate::dtype::Arith>(v: A) -> A {
    if v < A::ZERO {
        A::ZERO
    } else {
        v
    }
}

/// Which input dtypes a unary op accepts and what it computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnaryDTypes {
    /// Every dtype, computed in the input's own.
    All,
    /// Every dtype but bool.
    NotBool,
    /// Floats; integer and bool inputs compute in f32 (not in place).
    Float,
    /// Floats only: integer and bool inputs are an error (gelu, silu).
    FloatOnly,
}

/// Which operand dtypes a binary arithmetic op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinaryDTypes {
    /// Every dtype, computed in the promoted type.
    All,
    /// No bool operand (the message says why).
    NoBoolOperand(&'static str),
    /// The promoted type may not be bool.
    NoBoolCompute,
    /// Floats; integer promoted types compute in f32.
    Float,
    /// Integers and bool: a float promoted type is refused (last, as
    /// PyTorch's kernel dtype check).
    Integral,
}

/// How a scalar second operand enters a binary op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarRule {
    /// Rounded to the tensor's dtype, then widened (add, sub, comparisons).
    Elem,
    /// Converted straight to the compute type (mul, div).
    Acc,
}

/// Generates [`UnaryFn`] from the unary table.
macro_rules! unary_enum {
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
        /// A unary element-wise op of the table (clamp, which takes
        /// arguments, is `UnaryOp::Clamp`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum UnaryFn {
            $($V,)*
        }

        impl UnaryFn {
            /// A name unique to the row (two rows may share a method name,
            /// as gelu's exact and tanh forms do): the kernel-cache key
            /// (of the CUDA backend only).
            #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
            pub(crate) fn key(self) -> &'static str {
                match self {
                    $(UnaryFn::$V => stringify!($V),)*
                }
            }
            /// The op's name in errors (`neg`, `neg_`, ...).
            pub(crate) fn name(self, inplace: bool) -> &'static str {
                match (self, inplace) {
                    $((UnaryFn::$V, false) => stringify!($($m)? $($n)?),)*
                    $((UnaryFn::$V, true) => concat!(stringify!($($m)? $($n)?), "_"),)*
                }
            }
            /// The dtype rule.
            pub(crate) fn dtypes(self) -> UnaryDTypes {
                match self {
                    $(UnaryFn::$V => UnaryDTypes::$rule,)*
                }
            }
        }
    };
}
unary_op_table!(unary_enum);

/// Generates [`BinaryOp`] from the binary table.
macro_rules! binary_enum {
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
        /// A binary element-wise op: arithmetic writes the operands' dtype,
        /// comparisons write bool.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum BinaryOp {
            $($V,)*
            $($C,)*
        }

        impl BinaryOp {
            /// The op's name in errors (`add`, `add_`, ...).
            pub(crate) fn name(self, inplace: bool) -> &'static str {
                match (self, inplace) {
                    $((BinaryOp::$V, false) => stringify!($($m)? $($n)?),)*
                    $((BinaryOp::$V, true) => concat!(stringify!($($m)? $($n)?), "_"),)*
                    $((BinaryOp::$C, _) => stringify!($cm),)*
                }
            }
            /// Whether the op writes bool.
            pub(crate) fn is_comparison(self) -> bool {
                match self {
                    $(BinaryOp::$V => false,)*
                    $(BinaryOp::$C => true,)*
                }
            }
            /// The dtype rule (comparisons accept every dtype).
            pub(crate) fn dtypes(self) -> BinaryDTypes {
                match self {
                    $(BinaryOp::$V => BinaryDTypes::$rule $(($msg))?,)*
                    $(BinaryOp::$C => BinaryDTypes::All,)*
                }
            }
            /// How a scalar operand enters.
            pub(crate) fn scalar_rule(self) -> ScalarRule {
                match self {
                    $(BinaryOp::$V => ScalarRule::$scalar,)*
                    $(BinaryOp::$C => ScalarRule::Elem,)*
                }
            }
        }
    };
}
binary_op_table!(binary_enum);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_come_from_the_table() {
        assert!(BinaryOp::Ge.is_comparison() && !BinaryOp::Mul.is_comparison());
        assert_eq!(BinaryOp::Div.dtypes(), BinaryDTypes::Float);
        assert_eq!(BinaryOp::Mul.scalar_rule(), ScalarRule::Acc);
        assert_eq!(BinaryOp::Add.scalar_rule(), ScalarRule::Elem);
        assert_eq!(UnaryFn::Log.dtypes(), UnaryDTypes::Float);
        assert_eq!(UnaryFn::Relu.name(true), "relu_");
        assert_eq!(BinaryOp::DivFloor.name(true), "div_");
        assert_eq!(BinaryOp::Le.name(false), "le");
    }
}
