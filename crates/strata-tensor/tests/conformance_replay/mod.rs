//! The replay of one program in the conformance format (FORMAT.md of
//! `shared/conformance/`): binding inputs, running each step against strata
//! and comparing every variable with PyTorch's answer. Shared by
//! `tests/conformance.rs` (every vectors file) and the suite's fixtures in the
//! same format (`suite/fuzz_conformance_s80.rs`).

#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashSet;
use strata_tensor::{
    CrossEntropyArgs, DType, Device, GeluApprox, Operand, Reduction, RoundingMode, Scalar,
    SplitSize, Tensor, TensorError,
};

#[derive(Clone)]
pub enum Val {
    T(Tensor),
    B(bool),
}

pub enum Out {
    One(Val),
    Two(Tensor, Tensor),
    /// `split`/`chunk` pieces.
    Many(Vec<Tensor>),
}

pub fn class(e: &TensorError) -> &'static str {
    match e {
        TensorError::Shape { .. } => "shape",
        TensorError::Broadcast { .. } | TensorError::InPlaceBroadcast { .. } => "broadcast",
        TensorError::Layout { .. } => "layout",
        TensorError::DType { .. } => "dtype",
        TensorError::Dim { .. } => "dim",
        TensorError::Index { .. } => "index",
        TensorError::OutOfBounds { .. } => "bounds",
        TensorError::Overlap { .. } => "overlap",
        TensorError::Empty { .. } => "empty",
        TensorError::Value { .. } => "value",
        _ => "other",
    }
}

pub fn scalar(v: &Value) -> Result<Scalar, String> {
    let o = v.as_object().ok_or_else(|| format!("not a scalar: {v}"))?;
    if let Some(b) = o.get("bool") {
        return Ok(Scalar::Bool(b.as_bool().unwrap()));
    }
    if let Some(i) = o.get("int") {
        return Ok(Scalar::Int(i.as_i64().unwrap()));
    }
    if let Some(f) = o.get("float") {
        return Ok(Scalar::Float(float(f)));
    }
    Err(format!("bad scalar {v}"))
}

pub fn float(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => panic!("bad float {s}"),
        },
        _ => v.as_f64().unwrap(),
    }
}

pub fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        Value::Number(n) => vec![n.as_i64().unwrap()],
        _ => panic!("not ints: {v}"),
    }
}

pub fn dtype(v: &Value) -> DType {
    DType::parse(v.as_str().unwrap()).unwrap_or_else(|| panic!("bad dtype {v}"))
}

pub fn values(data: &Value, dt: DType) -> Vec<Scalar> {
    data.as_array()
        .unwrap()
        .iter()
        .map(|x| match dt {
            DType::Bool => Scalar::Bool(x.as_bool().unwrap()),
            // Exact in the dtype: round-trip through it so the comparison is in the dtype.
            d if d.is_float() => as_dtype(Scalar::Float(float(x)), d),
            _ => Scalar::Int(x.as_i64().unwrap()),
        })
        .collect()
}

pub fn as_dtype(s: Scalar, d: DType) -> Scalar {
    Tensor::from_scalars(&[s], &[1], d, Device::Cpu)
        .unwrap()
        .to_scalars()
        .unwrap()[0]
}

pub struct Env {
    pub vars: Vec<(String, Val)>,
    /// On a GPU, the results whose strides PyTorch's CUDA lays out from
    /// other operands than its CPU does (see [`casts_in_kernel`]), and
    /// everything computed from them: their strides are not compared with
    /// the vectors (PyTorch's CPU answers); their values are.
    pub cast_in_kernel: HashSet<String>,
}

impl Env {
    pub fn get(&self, name: &str) -> Result<&Val, String> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("unbound {name}"))
    }
    pub fn t(&self, v: &Value) -> Result<Tensor, String> {
        match self.get(v.as_str().ok_or_else(|| format!("not a name: {v}"))?)? {
            Val::T(t) => Ok(t.clone()),
            Val::B(_) => Err("not a tensor".into()),
        }
    }
    pub fn bind(&mut self, name: &str, v: Val) {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), v));
    }
}

pub fn arg(args: &[Value], i: usize) -> Option<&Value> {
    args.get(i).filter(|v| !v.is_null())
}

pub fn shape_usize(v: &Value) -> Option<Vec<usize>> {
    let s = ints(v);
    if s.iter().any(|&x| x < 0) {
        None
    } else {
        Some(s.into_iter().map(|x| x as usize).collect())
    }
}

/// Runs one step; Ok(Err(e)) is a strata error.
pub fn run_step(
    env: &Env,
    op: &str,
    args: &[Value],
    dev: Device,
) -> Result<Result<Out, TensorError>, String> {
    let one = |r: Result<Tensor, TensorError>| Ok(r.map(|t| Out::One(Val::T(t))));
    let ts = |i: usize| -> Result<Operand<'static>, String> {
        let v = &args[i];
        if v.is_string() {
            // Leak a clone so the operand can borrow for 'static within the step.
            let t: &'static Tensor = Box::leak(Box::new(env.t(v)?));
            Ok(Operand::Tensor(t))
        } else {
            Ok(Operand::Scalar(scalar(v)?))
        }
    };
    let opt_scalar =
        |i: usize| -> Result<Option<Scalar>, String> { arg(args, i).map(scalar).transpose() };
    let opt_dtype = |i: usize| arg(args, i).map(dtype);
    let mode = |i: usize| {
        arg(args, i).map(|m| match m.as_str().unwrap() {
            "trunc" => RoundingMode::Trunc,
            _ => RoundingMode::Floor,
        })
    };
    let a = || env.t(&args[0]);
    let int = |i: usize| args[i].as_i64().unwrap();
    match op {
        "zeros" | "ones" | "full" => {
            let shape = ints(&args[0]);
            let (value, dt) = match op {
                "zeros" => (Scalar::Int(0), opt_dtype(1).unwrap_or(DType::F32)),
                "ones" => (Scalar::Int(1), opt_dtype(1).unwrap_or(DType::F32)),
                _ => {
                    let v = scalar(&args[1])?;
                    (v, opt_dtype(2).unwrap_or(v.promotion_dtype()))
                }
            };
            one(Tensor::full_sizes(&shape, value, dt, dev))
        }
        "arange" => one(Tensor::arange(
            scalar(&args[0])?,
            scalar(&args[1])?,
            scalar(&args[2])?,
            opt_dtype(3),
            dev,
        )),
        "view" => one(a()?.view(&ints(&args[1]))),
        "reshape" => one(a()?.reshape(&ints(&args[1]))),
        "transpose" => one(a()?.transpose(int(1), int(2))),
        "t" => one(a()?.t()),
        "permute" => one(a()?.permute(&ints(&args[1]))),
        "narrow" => one(a()?.narrow(int(1), int(2), int(3))),
        "select" => one(a()?.select(int(1), int(2))),
        "slice" => one(a()?.slice(
            int(1),
            arg(args, 2).map(|v| v.as_i64().unwrap()),
            arg(args, 3).map(|v| v.as_i64().unwrap()),
            args.get(4).and_then(|v| v.as_i64()).unwrap_or(1),
        )),
        "expand" => one(a()?.expand(&ints(&args[1]))),
        "squeeze" => match arg(args, 1) {
            None => one(a()?.squeeze()),
            Some(d) => one(a()?.squeeze_dims(&ints(d))),
        },
        "unsqueeze" => one(a()?.unsqueeze(int(1))),
        "flatten" => one(a()?.flatten(
            arg(args, 1).map_or(0, |v| v.as_i64().unwrap()),
            arg(args, 2).map_or(-1, |v| v.as_i64().unwrap()),
        )),
        "as_strided" => one(a()?.as_strided(
            &ints(&args[1]),
            &ints(&args[2]),
            arg(args, 3).map(|v| v.as_i64().unwrap()),
        )),
        "contiguous" => one(a()?.contiguous()),
        "is_contiguous" => Ok(Ok(Out::One(Val::B(a()?.is_contiguous())))),
        "clone" => one(a()?.deep_clone()),
        "to_dtype" => one(a()?.to_dtype(dtype(&args[1]))),
        "add" => one(a()?.add(ts(1)?)),
        "sub" => one(a()?.sub(ts(1)?)),
        "mul" => one(a()?.mul(ts(1)?)),
        "div" => match mode(2) {
            None => one(a()?.div(ts(1)?)),
            Some(m) => one(a()?.div_mode(ts(1)?, m)),
        },
        "add_" => one(a()?.add_(ts(1)?)),
        "sub_" => one(a()?.sub_(ts(1)?)),
        "mul_" => one(a()?.mul_(ts(1)?)),
        "div_" => match mode(2) {
            None => one(a()?.div_(ts(1)?)),
            Some(m) => one(a()?.div_mode_(ts(1)?, m)),
        },
        "relu" => one(a()?.relu()),
        "neg" => one(a()?.neg()),
        "exp" => one(a()?.exp()),
        "log" => one(a()?.log()),
        "relu_" => one(a()?.relu_()),
        "neg_" => one(a()?.neg_()),
        "exp_" => one(a()?.exp_()),
        "clamp" => one(a()?.clamp(opt_scalar(1)?, opt_scalar(2)?)),
        "clamp_" => one(a()?.clamp_(opt_scalar(1)?, opt_scalar(2)?)),
        "fill_" => one(a()?.fill_(scalar(&args[1])?)),
        "zero_" => one(a()?.zero_()),
        "copy_" => one(a()?.copy_(&env.t(&args[1])?)),
        "addcmul_" => one(a()?.addcmul_(&env.t(&args[1])?, &env.t(&args[2])?, scalar(&args[3])?)),
        "where" => one(Tensor::where_cond(&a()?, ts(1)?, ts(2)?)),
        "eq" => one(a()?.eq(ts(1)?)),
        "ne" => one(a()?.ne(ts(1)?)),
        "lt" => one(a()?.lt(ts(1)?)),
        "le" => one(a()?.le(ts(1)?)),
        "gt" => one(a()?.gt(ts(1)?)),
        "ge" => one(a()?.ge(ts(1)?)),
        "sum" | "mean" => {
            let dims = arg(args, 1).map(ints);
            let keep = arg(args, 2).is_some_and(|v| v.as_bool().unwrap());
            if op == "sum" {
                one(a()?.sum(dims.as_deref(), keep))
            } else {
                one(a()?.mean(dims.as_deref(), keep))
            }
        }
        "max" | "min" => match arg(args, 1) {
            None => one(if op == "max" { a()?.max() } else { a()?.min() }),
            Some(d) => {
                let keep = arg(args, 2).is_some_and(|v| v.as_bool().unwrap());
                let d = d.as_i64().unwrap();
                let r = if op == "max" {
                    a()?.max_dim(d, keep)
                } else {
                    a()?.min_dim(d, keep)
                };
                Ok(r.map(|(v, i)| Out::Two(v, i)))
            }
        },
        "argmax" => {
            let keep = arg(args, 2).is_some_and(|v| v.as_bool().unwrap());
            one(a()?.argmax(arg(args, 1).map(|v| v.as_i64().unwrap()), keep))
        }
        // --- dimops: argmin, var, std, logsumexp (issue 12) ---
        "argmin" => {
            let keep = arg(args, 2).is_some_and(|v| v.as_bool().unwrap());
            one(a()?.argmin(arg(args, 1).map(|v| v.as_i64().unwrap()), keep))
        }
        "var" | "std" => {
            let dims = arg(args, 1).map(ints);
            let correction = arg(args, 2).map_or(1.0, float);
            let keep = arg(args, 3).is_some_and(|v| v.as_bool().unwrap());
            if op == "var" {
                one(a()?.var(dims.as_deref(), correction, keep))
            } else {
                one(a()?.std(dims.as_deref(), correction, keep))
            }
        }
        "logsumexp" => {
            let keep = arg(args, 2).is_some_and(|v| v.as_bool().unwrap());
            one(a()?.logsumexp(&ints(&args[1]), keep))
        }
        "matmul" => one(a()?.matmul(&env.t(&args[1])?)),
        "mm" => one(a()?.mm(&env.t(&args[1])?)),
        "bmm" => one(a()?.bmm(&env.t(&args[1])?)),
        "addmm" => one(a()?.addmm(&env.t(&args[1])?, &env.t(&args[2])?)),
        // ----- issue 12: elementwise math, ops along a dim, creation -----
        "sqrt" => one(a()?.sqrt()),
        "rsqrt" => one(a()?.rsqrt()),
        "abs" => one(a()?.abs()),
        "tanh" => one(a()?.tanh()),
        "sigmoid" => one(a()?.sigmoid()),
        "silu" => one(a()?.silu()),
        "sin" => one(a()?.sin()),
        "cos" => one(a()?.cos()),
        "erf" => one(a()?.erf()),
        "log1p" => one(a()?.log1p()),
        "expm1" => one(a()?.expm1()),
        "reciprocal" => one(a()?.reciprocal()),
        "sign" => one(a()?.sign()),
        "sqrt_" => one(a()?.sqrt_()),
        "rsqrt_" => one(a()?.rsqrt_()),
        "abs_" => one(a()?.abs_()),
        "tanh_" => one(a()?.tanh_()),
        "sigmoid_" => one(a()?.sigmoid_()),
        "silu_" => one(a()?.silu_()),
        "sin_" => one(a()?.sin_()),
        "cos_" => one(a()?.cos_()),
        "erf_" => one(a()?.erf_()),
        "log1p_" => one(a()?.log1p_()),
        "expm1_" => one(a()?.expm1_()),
        "reciprocal_" => one(a()?.reciprocal_()),
        "sign_" => one(a()?.sign_()),
        "gelu" => {
            let approx = match arg(args, 1).and_then(|v| v.as_str()) {
                Some("tanh") => GeluApprox::Tanh,
                _ => GeluApprox::None,
            };
            one(a()?.gelu(approx))
        }
        "pow" => {
            if args[0].is_string() {
                one(a()?.pow(ts(1)?))
            } else {
                one(Tensor::scalar_pow(scalar(&args[0])?, &env.t(&args[1])?))
            }
        }
        "pow_" => one(a()?.pow_(ts(1)?)),
        "maximum" => one(a()?.maximum(&env.t(&args[1])?)),
        "minimum" => one(a()?.minimum(&env.t(&args[1])?)),
        "softmax" => one(a()?.softmax(int(1), opt_dtype(2))),
        "log_softmax" => one(a()?.log_softmax(int(1), opt_dtype(2))),
        "cumsum" => one(a()?.cumsum(int(1), opt_dtype(2))),
        "zeros_like" => one(a()?.zeros_like(opt_dtype(1))),
        "ones_like" => one(a()?.ones_like(opt_dtype(1))),
        "full_like" => one(a()?.full_like(scalar(&args[1])?, opt_dtype(2))),
        "eye" => {
            let n = args[0].as_i64().unwrap();
            let m = arg(args, 1).map(|v| v.as_i64().unwrap());
            if n < 0 || m.is_some_and(|m| m < 0) {
                // strata's eye takes usize sizes, so a negative size cannot
                // reach it; FORMAT.md section 6 makes it a `shape` error,
                // which is what a binding passing i64 sizes would raise.
                return Ok(Err(TensorError::Shape {
                    op: "eye",
                    msg: format!("negative size: n = {n}, m = {m:?}"),
                }));
            }
            one(Tensor::eye(
                n as usize,
                m.map(|m| m as usize),
                opt_dtype(2).unwrap_or(DType::F32),
                dev,
            ))
        }
        // ---- issue 12: nn and indexing ops (branch nn) ----
        op => nn_step(env, op, args),
    }
}

/// A loss's reduction keyword.
pub fn reduction(v: Option<&Value>) -> Reduction {
    match v.and_then(|v| v.as_str()) {
        Some("none") => Reduction::None,
        Some("sum") => Reduction::Sum,
        _ => Reduction::Mean,
    }
}

/// The ops of the nn and indexing groups (FORMAT.md section 7.2).
pub fn nn_step(env: &Env, op: &str, args: &[Value]) -> Result<Result<Out, TensorError>, String> {
    let one = |r: Result<Tensor, TensorError>| Ok(r.map(|t| Out::One(Val::T(t))));
    let many = |r: Result<Vec<Tensor>, TensorError>| Ok(r.map(Out::Many));
    let t = |i: usize| env.t(&args[i]);
    let opt_t = |i: usize| arg(args, i).map(|v| env.t(v)).transpose();
    let int = |i: usize| args[i].as_i64().unwrap();
    let opt_int = |i: usize| arg(args, i).map(|v| v.as_i64().unwrap());
    let list = |i: usize| -> Result<Vec<Tensor>, String> {
        args[i]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| env.t(v))
            .collect()
    };
    let value = |i: usize| -> Result<Operand<'static>, String> {
        let v = &args[i];
        if v.is_string() {
            let t: &'static Tensor = Box::leak(Box::new(env.t(v)?));
            Ok(Operand::Tensor(t))
        } else {
            Ok(Operand::Scalar(scalar(v)?))
        }
    };
    match op {
        "layer_norm" => {
            let shape = shape_usize(&args[1]).ok_or("negative normalized_shape")?;
            let (w, b) = (opt_t(2)?, opt_t(3)?);
            let eps = arg(args, 4).map_or(1e-5, float);
            one(t(0)?.layer_norm(&shape, w.as_ref(), b.as_ref(), eps))
        }
        "cross_entropy" => {
            let w = opt_t(2)?;
            let a = CrossEntropyArgs {
                weight: w.as_ref(),
                ignore_index: opt_int(3).unwrap_or(-100),
                reduction: reduction(arg(args, 4)),
                label_smoothing: arg(args, 5).map_or(0.0, float),
            };
            one(t(0)?.cross_entropy(&t(1)?, a))
        }
        "nll_loss" => {
            let w = opt_t(2)?;
            one(t(0)?.nll_loss(
                &t(1)?,
                w.as_ref(),
                opt_int(3).unwrap_or(-100),
                reduction(arg(args, 4)),
            ))
        }
        "mse_loss" => {
            let w = opt_t(3)?;
            one(t(0)?.mse_loss(&t(1)?, reduction(arg(args, 2)), w.as_ref()))
        }
        "embedding" => one(Tensor::embedding(&t(0)?, &t(1)?, opt_int(2))),
        "index_select" => one(t(0)?.index_select(int(1), &t(2)?)),
        "gather" => one(t(0)?.gather(int(1), &t(2)?)),
        "scatter_add" => one(t(0)?.scatter_add(int(1), &t(2)?, &t(3)?)),
        "scatter_add_" => one(t(0)?.scatter_add_(int(1), &t(2)?, &t(3)?)),
        "masked_fill" => one(t(0)?.masked_fill(&t(1)?, value(2)?)),
        "masked_fill_" => one(t(0)?.masked_fill_(&t(1)?, value(2)?)),
        // The `masked` group (conformance/masked.json, written by
        // benches/anchors/gen_conformance_masked.py).
        "masked_select" => one(t(0)?.masked_select(&t(1)?)),
        "masked_scatter" => one(t(0)?.masked_scatter(&t(1)?, &t(2)?)),
        "masked_scatter_" => one(t(0)?.masked_scatter_(&t(1)?, &t(2)?)),
        "triu" => one(t(0)?.triu(opt_int(1).unwrap_or(0))),
        "tril" => one(t(0)?.tril(opt_int(1).unwrap_or(0))),
        "triu_" => one(t(0)?.triu_(opt_int(1).unwrap_or(0))),
        "tril_" => one(t(0)?.tril_(opt_int(1).unwrap_or(0))),
        "cat" | "stack" => {
            let ts = list(0)?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            let d = opt_int(1).unwrap_or(0);
            one(if op == "cat" {
                Tensor::cat(&refs, d)
            } else {
                Tensor::stack(&refs, d)
            })
        }
        "split" => {
            let s = match &args[1] {
                Value::Array(_) => SplitSize::Sections(ints(&args[1])),
                v => SplitSize::Size(v.as_i64().unwrap()),
            };
            many(t(0)?.split(s, opt_int(2).unwrap_or(0)))
        }
        "chunk" => many(t(0)?.chunk(int(1), opt_int(2).unwrap_or(0))),
        // (fuzz_conformance_ops.py's families of seeds >= 3184)
        "unbind" => many(t(0)?.unbind(opt_int(1).unwrap_or(0))),
        "broadcast_to" => match shape_usize(&args[1]) {
            Some(s) => one(t(0)?.broadcast_to(&s)),
            None => Err("broadcast_to with a negative size".into()),
        },
        "addcmul" => one(t(0)?.addcmul(&env.t(&args[1])?, &env.t(&args[2])?, scalar(&args[3])?)),
        // (fuzz_conformance_s56.py's `grad_ops`: PyTorch's aten ops
        // gelu_backward, _softmax_backward_data(grad, output, dim) and
        // _log_softmax_backward_data, and torch.linalg.vector_norm)
        "gelu_backward" => {
            let approx = match arg(args, 2).and_then(|v| v.as_str()) {
                Some("tanh") => GeluApprox::Tanh,
                _ => GeluApprox::None,
            };
            one(t(0)?.gelu_backward(&t(1)?, approx))
        }
        "softmax_backward" => one(t(1)?.softmax_backward(&t(0)?, int(2))),
        "log_softmax_backward" => one(t(1)?.log_softmax_backward(&t(0)?, int(2))),
        "vector_norm" => {
            let p = match scalar(&args[1])? {
                Scalar::Int(i) => i as f64,
                Scalar::Float(f) => f,
                Scalar::Bool(b) => f64::from(u8::from(b)),
            };
            let dims = arg(args, 2).map(ints);
            let keep = arg(args, 3).is_some_and(|v| v.as_bool().unwrap());
            one(t(0)?.vector_norm(p, dims.as_deref(), keep))
        }
        _ => Err(format!("unknown op {op}")),
    }
}

/// The tensors a step's arguments name (in lists too, as `cat`'s).
pub fn operand_names<'a>(env: &Env, args: &'a [Value], out: &mut Vec<&'a str>) {
    for a in args {
        match a {
            Value::String(n) if matches!(env.get(n), Ok(Val::T(_))) => out.push(n),
            Value::Array(v) => operand_names(env, v, out),
            _ => {}
        }
    }
}

/// Whether PyTorch's CUDA lays a step's new result out from other strides
/// than its CPU does: on the CPU, TensorIterator first converts an operand
/// of another dtype than the computation's (`.to(common_dtype)`: dense in
/// the order of its strides, an expanded or stepped operand losing its
/// layout) and orders the output's dims by the converted operands' strides;
/// on CUDA the kernel casts as it reads, so the operands' own strides
/// decide (`docs/bench-results/2026-12-05-session60-probe_strides.py`
/// prints both devices' strides for the cases session 60's H100 run
/// showed). strata's GPU follows PyTorch's CUDA (`iter_operand_layout`). Without the op's
/// computation dtype at hand, a step counts when its tensor operands'
/// dtypes differ, or when a result that is not bool has another dtype than
/// an operand; and any step that reads such a result. `clamp` converts its
/// input itself on every device (`build_unary_op(out, self.to(result_type))`),
/// so PyTorch's two devices lay it out alike: only a result it reads counts.
pub fn casts_in_kernel(env: &Env, op: &str, operands: &[&str], results: &[Tensor]) -> bool {
    if matches!(op, "clamp" | "clamp_") {
        return operands.iter().any(|n| env.cast_in_kernel.contains(*n));
    }
    let dts: Vec<DType> = operands
        .iter()
        .filter_map(|n| match env.get(n) {
            Ok(Val::T(t)) => Some(t.dtype()),
            _ => None,
        })
        .collect();
    operands.iter().any(|n| env.cast_in_kernel.contains(*n))
        || dts.windows(2).any(|w| w[0] != w[1])
        || results
            .iter()
            .any(|r| r.dtype() != DType::Bool && dts.iter().any(|&d| d != r.dtype()))
}

pub fn run_case(case: &Value, dev: Device) -> Result<(), String> {
    let mut env = Env {
        vars: Vec::new(),
        cast_in_kernel: HashSet::new(),
    };
    for inp in case["inputs"].as_array().unwrap() {
        let dt = dtype(&inp["dtype"]);
        let shape = shape_usize(&inp["shape"]).unwrap();
        let t = Tensor::from_scalars(&values(&inp["data"], dt), &shape, dt, dev)
            .map_err(|e| e.to_string())?;
        env.bind(inp["name"].as_str().unwrap(), Val::T(t));
    }
    for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
        let op = step["op"].as_str().unwrap();
        let args = step["args"].as_array().unwrap();
        let r = run_step(&env, op, args, dev).map_err(|e| format!("step {i} ({op}): {e}"))?;
        match (r, step.get("error").and_then(|e| e.as_str())) {
            (Ok(_), Some(want)) => {
                return Err(format!(
                    "step {i} ({op}) succeeded, expected a {want} error"
                ))
            }
            (Err(e), Some(want)) => {
                if class(&e) != want {
                    return Err(format!(
                        "step {i} ({op}): error class {} ({e}), expected {want}",
                        class(&e)
                    ));
                }
            }
            (Err(e), None) => return Err(format!("step {i} ({op}) failed: {e}")),
            (Ok(out), None) => {
                if op.ends_with('_') {
                    continue;
                }
                if dev != Device::Cpu {
                    let mut names = Vec::new();
                    operand_names(&env, args, &mut names);
                    let results: Vec<Tensor> = match &out {
                        Out::One(Val::T(t)) => vec![t.clone()],
                        Out::One(Val::B(_)) => vec![],
                        Out::Many(v) => v.clone(),
                        Out::Two(a, b) => vec![a.clone(), b.clone()],
                    };
                    let cast = casts_in_kernel(&env, op, &names, &results);
                    let outs: Vec<String> = match &step["out"] {
                        Value::String(n) => vec![n.clone()],
                        Value::Array(v) => v
                            .iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect(),
                        _ => vec![],
                    };
                    for n in outs {
                        if cast {
                            env.cast_in_kernel.insert(n);
                        } else {
                            env.cast_in_kernel.remove(&n);
                        }
                    }
                }
                match (out, &step["out"]) {
                    (Out::One(v), Value::String(name)) => env.bind(name, v),
                    (Out::Many(v), Value::Array(names)) if v.len() == names.len() => {
                        for (t, n) in v.into_iter().zip(names) {
                            env.bind(n.as_str().unwrap(), Val::T(t));
                        }
                    }
                    (Out::Two(a, b), Value::Array(names)) => {
                        env.bind(names[0].as_str().unwrap(), Val::T(a));
                        env.bind(names[1].as_str().unwrap(), Val::T(b));
                    }
                    _ => return Err(format!("step {i} ({op}): output arity mismatch")),
                }
            }
        }
    }
    check(case, &env)
}

pub fn check(case: &Value, env: &Env) -> Result<(), String> {
    let expect = case["expect"].as_object().unwrap();
    let signed_zero = case["tags"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "signed_zero");
    let bound: HashSet<&str> = env.vars.iter().map(|(n, _)| n.as_str()).collect();
    let expected: HashSet<&str> = expect.keys().map(|k| k.as_str()).collect();
    if bound != expected {
        return Err(format!(
            "bound variables {bound:?} differ from expected {expected:?}"
        ));
    }
    for (name, want) in expect {
        let got = env.get(name)?;
        let t = match (got, want.get("value")) {
            (Val::B(b), Some(w)) => {
                if Some(*b) != w.as_bool() {
                    return Err(format!("{name}: {b} != {w}"));
                }
                continue;
            }
            (Val::T(t), None) => t,
            _ => return Err(format!("{name}: kind mismatch")),
        };
        let shape: Vec<usize> = ints(&want["shape"])
            .into_iter()
            .map(|x| x as usize)
            .collect();
        if t.shape() != shape.as_slice() {
            return Err(format!("{name}: shape {:?} != {:?}", t.shape(), shape));
        }
        let dt = dtype(&want["dtype"]);
        if t.dtype() != dt {
            return Err(format!("{name}: dtype {} != {dt}", t.dtype()));
        }
        let got_v = t.to_scalars().map_err(|e| e.to_string())?;
        let want_v = values(&want["data"], dt);
        // STRATA_CONFORMANCE_EXACT=1 (a sweep, not the format's rule): every
        // float compared bit for bit with PyTorch's, tolerances and the sign
        // of zero included.
        let exact = std::env::var("STRATA_CONFORMANCE_EXACT").is_ok_and(|v| v == "1");
        let signed_zero = signed_zero || exact;
        let tol = want
            .get("tol")
            .filter(|_| !exact)
            .map(|t| (t["rtol"].as_f64().unwrap(), t["atol"].as_f64().unwrap()));
        for (k, (g, w)) in got_v.iter().zip(&want_v).enumerate() {
            let ok = match (g, w) {
                (Scalar::Float(g), Scalar::Float(w)) => {
                    if w.is_nan() {
                        g.is_nan()
                    } else if w.is_infinite() || tol.is_none() {
                        g == w && (!signed_zero || g.is_sign_negative() == w.is_sign_negative())
                    } else {
                        let (r, a) = tol.unwrap();
                        (g - w).abs() <= a + r * w.abs()
                    }
                }
                (g, w) => g == w,
            };
            if !ok {
                return Err(format!("{name}: element {k}: got {g:?}, want {w:?}"));
            }
        }
        // Storage: the first variable (binding order) sharing this storage.
        // Not compared for tensors without elements: PyTorch gives every
        // empty storage a null data pointer, so the identity its generator
        // records for them is an artifact (and strata may share one empty
        // storage among empty tensors).
        let want_storage = want["storage"].as_str().unwrap();
        if t.numel() == 0 {
            continue;
        }
        let first = env
            .vars
            .iter()
            .find(|(_, v)| matches!(v, Val::T(o) if o.same_storage(t)))
            .map(|(n, _)| n.as_str())
            .unwrap();
        if first != want_storage {
            return Err(format!(
                "{name}: shares storage with {first}, expected {want_storage}"
            ));
        }
        // STRATA_CONFORMANCE_STRIDES=1 (a sweep, not the format's rule): the
        // strides PyTorch chose for results of layout `info` compared too.
        // STRATA_CONFORMANCE_STRIDES=all: every result's strides on every
        // dim, those of dims of size 0 and 1 too (which address nothing, so
        // the format leaves them free, but a user reading `strides()` sees
        // them).
        if env.cast_in_kernel.contains(name.as_str()) {
            continue;
        }
        let strides_mode = std::env::var("STRATA_CONFORMANCE_STRIDES").unwrap_or_default();
        let strides_too = strides_mode == "1" || strides_mode == "all";
        if strides_too && (want["layout"] == "info" || strides_mode == "all") {
            let strides = ints(&want["strides"]);
            let all = strides_mode == "all";
            for d in 0..t.ndim() {
                if (all || t.shape()[d] > 1) && t.strides()[d] as i64 != strides[d] {
                    return Err(format!(
                        "{name}: strides {:?} != {strides:?} (layout {})",
                        t.strides(),
                        want["layout"]
                    ));
                }
            }
        }
        if want["layout"] == "checked" {
            let strides = ints(&want["strides"]);
            for d in 0..t.ndim() {
                if t.shape()[d] > 1 && t.strides()[d] as i64 != strides[d] {
                    return Err(format!("{name}: strides {:?} != {strides:?}", t.strides()));
                }
            }
            if t.offset() as i64 != want["offset"].as_i64().unwrap() {
                return Err(format!(
                    "{name}: offset {} != {}",
                    t.offset(),
                    want["offset"]
                ));
            }
            if t.is_contiguous() != want["contiguous"].as_bool().unwrap() {
                return Err(format!("{name}: is_contiguous {}", t.is_contiguous()));
            }
        }
    }
    Ok(())
}
