//! The gradient oracle: small random programs over the differentiable ops
//! with PyTorch's forward values and gradients (written by
//! `benches/anchors/fuzz_grad.py`), replayed here. Finite differences
//! (`gradcheck*.rs`) cannot see the conventions at kinks and ties (relu and
//! abs at 0, maximum of equal values, std at 0, sqrt at 0, embedding's
//! padding row, ignored targets ...); the inputs here are mostly exact pool
//! fractions, so those points come up all the time.
//!
//! Reads the checked-in `tests/grad_oracle.json` and, when the environment
//! variable `STRATA_GRAD_ORACLE_DIR` names a folder, every `*.json` in it
//! (larger runs of the generator, not checked in).
//!
//! An `exact` program (pool inputs, exact ops only) must agree bit for bit
//! (-0.0 == 0.0 and NaN == NaN); the others to a relative 1e-5 plus an
//! absolute 1e-6 of the expected tensor's largest finite magnitude, plus
//! twice PyTorch's own f32 error (see [`Tol`] for programs with autocast
//! steps and for f16/bf16 parameters).
//!
//! Seeds from 173 on also write two other kinds of program (`kind`):
//! `train` programs, whose leaves are parameters trained for a few
//! iterations by SGD, Adam or AdamW (through a GradScaler, clip_grad_norm_,
//! zero_grad or not: [`run_train`]), and `api` programs, which run
//! retain_grad, tensor and post-accumulate-grad hooks, zero_grad and
//! several `backward`/`grad` passes after the forward ([`run_api`]).
//!
//! Seeds from 181 on add session 44's families (the generator's docstring
//! lists them): sub-programs replayed by `seq` (steps named `q<i>.<k>`),
//! steps in f64/bf16/f16 (`to_dtype`, `to_main`; float tensors of the JSON
//! name their dtype), in-place ops after a use of the modified tensor
//! (`inplace_after`, `leaf_nograd`), and a second backward pass
//! (`second_pass`: "retain" or "released"). Where PyTorch's backward
//! failed, `expect_error` says how ("saved_modified", "graph_released")
//! and strata must fail alike (the gradients are not compared then).
//!
//! Seeds from 208 on also draw, in `train` programs, SGD's dampening,
//! nesterov and maximize, Adam's and AdamW's amsgrad and maximize, and
//! fused Adam/AdamW under a GradScaler for f32/f64 parameters too (the
//! replay passes `fused` to `with_fused`: the scaler then hands the step
//! its scale).
//!
//! The base of an `inplace_view` step is `(x + 0).contiguous()` where the
//! generator takes it so (seeds from 173 on outside sub-programs, from 220
//! on inside them), else `x + 0`: since session 56 strata lays `x + 0` out
//! as PyTorch does (transposed for a transposed x), so which reshapes of
//! the base are views depends on that choice as it does in PyTorch
//! ([`Env::contiguous_base`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use strata_autograd::{
    clip_grad_norm_, grad_with, Adam, AdamW, AttentionArgs, AttentionSaving, AutocastGuard,
    AutogradError, DeviceType, GradArgs, GradScaler, NoGradGuard, Optimizer, Sgd, Var,
};
use strata_tensor::{CrossEntropyArgs, DType, Device, GeluApprox, Reduction, Tensor};

/// The generator's JSON (exact f64 round trip: `float_roundtrip`).
type J = serde_json::Value;

/// Lenient accessors for the generator's fields: a missing key reads as
/// null, and the non-finite numbers, which JSON cannot hold, are the strings
/// "nan", "inf" and "-inf".
trait Field {
    fn key(&self, k: &str) -> &J;
    fn arr(&self) -> &[J];
    fn str(&self) -> &str;
    fn f(&self) -> f64;
    fn i(&self) -> i64;
    fn b(&self) -> bool;
    fn ints(&self) -> Vec<i64>;
}

impl Field for J {
    fn key(&self, k: &str) -> &J {
        self.get(k).unwrap_or(&J::Null)
    }
    fn arr(&self) -> &[J] {
        self.as_array().map_or(&[], Vec::as_slice)
    }
    fn str(&self) -> &str {
        self.as_str().unwrap_or("")
    }
    fn f(&self) -> f64 {
        match self {
            J::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            J::String(s) if s == "inf" => f64::INFINITY,
            J::String(s) if s == "-inf" => f64::NEG_INFINITY,
            J::Bool(b) => f64::from(u8::from(*b)),
            _ => f64::NAN,
        }
    }
    fn i(&self) -> i64 {
        match self {
            J::Number(n) => n.as_i64().unwrap_or_else(|| self.f() as i64),
            _ => self.f() as i64,
        }
    }
    fn b(&self) -> bool {
        self.as_bool() == Some(true)
    }
    fn ints(&self) -> Vec<i64> {
        self.arr().iter().map(Field::i).collect()
    }
}

fn tensor(j: &J) -> Tensor {
    let shape: Vec<usize> = j
        .key("shape")
        .arr()
        .iter()
        .map(|x| x.i() as usize)
        .collect();
    let data = j.key("data").arr();
    match j.key("dtype").str() {
        "i64" => Tensor::from_vec(data.iter().map(J::i).collect(), &shape, Device::Cpu),
        "i32" => Tensor::from_vec(
            data.iter().map(|x| x.i() as i32).collect::<Vec<i32>>(),
            &shape,
            Device::Cpu,
        ),
        "bool" => Tensor::from_vec(data.iter().map(J::b).collect(), &shape, Device::Cpu),
        // (seeds >= 181 name each float tensor's dtype; bf16/f16 values are
        // exact in f32)
        "f64" => Tensor::from_vec(data.iter().map(J::f).collect(), &shape, Device::Cpu),
        d @ ("bf16" | "f16") => Tensor::from_vec(
            data.iter().map(|x| x.f() as f32).collect::<Vec<f32>>(),
            &shape,
            Device::Cpu,
        )
        .and_then(|t| t.to_dtype(dtype_of(d))),
        _ => Tensor::from_vec(
            data.iter().map(|x| x.f() as f32).collect::<Vec<f32>>(),
            &shape,
            Device::Cpu,
        ),
    }
    .unwrap()
}

#[derive(Clone)]
enum Val {
    V(Var),
    T(Tensor),
}

fn reduction(j: &J) -> Reduction {
    match j.str() {
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        _ => Reduction::Mean,
    }
}

fn opt_dims(j: &J) -> Option<Vec<i64>> {
    (!j.is_null()).then(|| j.ints())
}

/// A replay failure: what went wrong, for the report.
struct Fail(String);

impl From<AutogradError> for Fail {
    fn from(e: AutogradError) -> Fail {
        Fail(e.to_string())
    }
}

/// The values of a program by name: its inputs, its steps' outputs (and,
/// inside a sub-program, the sub-program's), and where they are.
#[derive(Clone, Default)]
struct Env {
    vals: HashMap<String, Val>,
    /// The program's seed (the number before the `:` of its id).
    seed: u64,
    /// Whether the steps run inside a sub-program (`seq`, a checkpointed or
    /// autocast region).
    in_sub_program: bool,
}

/// The first seed whose `inplace_view` base is contiguous outside
/// sub-programs (the generator's `S43B_SEED`), and the first where it is
/// inside them too (`S46_SEED`).
const S43B_SEED: u64 = 173;
const S46_SEED: u64 = 220;

impl Env {
    fn get(&self, name: &str) -> Option<&Val> {
        self.vals.get(name)
    }

    fn insert(&mut self, name: String, v: Val) {
        self.vals.insert(name, v);
    }

    /// Whether the generator made the base of an `inplace_view` step
    /// contiguous (`base = (x + 0).contiguous()`) or left it `x + 0`, whose
    /// layout follows x's in PyTorch and in strata. A reshape of a
    /// transposed base copies, and an in-place op on the copy leaves the
    /// base alone, so the replay must take the same base.
    fn contiguous_base(&self) -> bool {
        self.seed >= S46_SEED || (self.seed >= S43B_SEED && !self.in_sub_program)
    }
}

/// The dtype names of the generator.
fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::I64 => "i64",
        DType::Bool => "bool",
        _ => "other",
    }
}

fn dtype_of(name: &str) -> DType {
    match name {
        "f64" => DType::F64,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        _ => DType::F32,
    }
}

/// Runs `steps` on `env`, adding each output. `dtypes` (the program's):
/// the dtype each output of an autocast sub-program had in PyTorch.
fn run_steps(steps: &[J], env: &mut Env, dtypes: &J) -> Result<(), Fail> {
    for s in steps {
        let ins = s
            .key("in")
            .arr()
            .iter()
            .map(|n| {
                env.get(n.str())
                    .cloned()
                    .ok_or_else(|| Fail(format!("no value named {}", n.str())))
            })
            .collect::<Result<Vec<Val>, Fail>>()?;
        let op = s.key("op").str();
        let name = s.key("out").str();
        let out = run_step(op, &ins, s.key("args"), env, dtypes)
            .map_err(|e| Fail(format!("{op}: error {}", e.0)))?;
        let want = dtypes.key(name);
        if !want.is_null() && dtype_name(out.dtype()) != want.str() {
            return Err(Fail(format!(
                "{op} ({name}): dtype {}, PyTorch {}",
                dtype_name(out.dtype()),
                want.str()
            )));
        }
        env.insert(name.to_string(), Val::V(out));
    }
    Ok(())
}

/// The variable named `name` of `env`.
fn var_of(env: &Env, name: &str) -> Result<Var, Fail> {
    match env.get(name) {
        Some(Val::V(v)) => Ok(v.clone()),
        _ => Err(Fail(format!("{name} is not a variable"))),
    }
}

/// A sub-program's steps (`args.steps`) from `x`, its input, named as the
/// generator names it (`s<i>.0`); returns its result (`args.result`).
fn sub_program(x: Var, a: &J, env: &Env, dtypes: &J) -> Result<Var, Fail> {
    let res = a.key("result").str();
    let input = format!("{}.0", res.split('.').next().unwrap_or(""));
    let mut env = env.clone();
    env.in_sub_program = true;
    env.insert(input, Val::V(x));
    run_steps(a.key("steps").arr(), &mut env, dtypes)?;
    var_of(&env, res)
}

/// One step of a program.
fn run_step(op: &str, ins: &[Val], a: &J, env: &Env, dtypes: &J) -> Result<Var, Fail> {
    let var = |i: usize| match &ins[i] {
        Val::V(v) => v.clone(),
        Val::T(t) => Var::new(t.clone()),
    };
    let ten = |i: usize| match &ins[i] {
        Val::T(t) => t.clone(),
        Val::V(v) => v.data().clone(),
    };
    let x = var(0);
    let dim = a.key("dim").i();
    Ok(match op {
        "neg" => x.neg()?,
        "relu" => x.relu()?,
        "exp" => x.exp()?,
        "log" => x.log()?,
        "sqrt" => x.sqrt()?,
        "rsqrt" => x.rsqrt()?,
        "abs" => x.abs()?,
        "tanh" => x.tanh()?,
        "sigmoid" => x.sigmoid()?,
        "silu" => x.silu()?,
        "gelu" => x.gelu(if a.key("approximate").str() == "tanh" {
            GeluApprox::Tanh
        } else {
            GeluApprox::None
        })?,
        "sin" => x.sin()?,
        "cos" => x.cos()?,
        "erf" => x.erf()?,
        "log1p" => x.log1p()?,
        "expm1" => x.expm1()?,
        "reciprocal" => x.reciprocal()?,
        "sign" => x.sign()?,
        "add" => x.add(&var(1))?,
        "sub" => x.sub(&var(1))?,
        "mul" => x.mul(&var(1))?,
        "div" => x.div(&var(1))?,
        "maximum" => x.maximum(&var(1))?,
        "minimum" => x.minimum(&var(1))?,
        "rsub" => x.rsub(a.key("c").f())?,
        "pow_scalar" => x.pow_scalar(a.key("e").f())?,
        "scalar_pow" => Var::scalar_pow(a.key("base").f(), &x)?,
        "pow" => x.pow(&var(1))?,
        "sum" | "mean" | "var" | "std" => {
            let d = opt_dims(a.key("dims"));
            let k = a.key("keepdim").b();
            let c = a.key("correction").f();
            match op {
                "sum" => x.sum(d.as_deref(), k)?,
                "mean" => x.mean(d.as_deref(), k)?,
                "var" => x.var(d.as_deref(), c, k)?,
                _ => x.std(d.as_deref(), c, k)?,
            }
        }
        "logsumexp" => x.logsumexp(&a.key("dims").ints(), a.key("keepdim").b())?,
        "clamp" => {
            let bound = |k: &str| (!a.key(k).is_null()).then(|| a.key(k).f());
            x.clamp(bound("min"), bound("max"))?
        }
        "max_all" => x.max()?,
        "min_all" => x.min()?,
        "max_dim" => x.max_dim(dim, a.key("keepdim").b())?.0,
        "min_dim" => x.min_dim(dim, a.key("keepdim").b())?.0,
        "amax" => x.amax(opt_dims(a.key("dims")).as_deref(), a.key("keepdim").b())?,
        "amin" => x.amin(opt_dims(a.key("dims")).as_deref(), a.key("keepdim").b())?,
        "norm" => x.norm(
            a.key("p").f(),
            opt_dims(a.key("dims")).as_deref(),
            a.key("keepdim").b(),
        )?,
        "softmax" => x.softmax(dim, None)?,
        "log_softmax" => x.log_softmax(dim, None)?,
        "cumsum" => x.cumsum(dim, None)?,
        "triu" => x.triu(a.key("diagonal").i())?,
        "tril" => x.tril(a.key("diagonal").i())?,
        "masked_fill" => x.masked_fill(&ten(1), a.key("value").f())?,
        "masked_select" => x.masked_select(&ten(1))?,
        "where" => Var::where_cond(&ten(0), &var(1), &var(2))?,
        "index_select" => x.index_select(dim, &ten(1))?,
        "gather" => x.gather(dim, &ten(1))?,
        "scatter_add" => x.scatter_add(dim, &ten(1), &var(2))?,
        "embedding" => {
            let p = a.key("padding_idx");
            x.embedding(&ten(1), (!p.is_null()).then(|| p.i()))?
        }
        "transpose" => x.transpose(a.key("d0").i(), a.key("d1").i())?,
        "t" => x.t()?,
        "reshape" => x.reshape(&a.key("shape").ints())?,
        "unsqueeze" => x.unsqueeze(dim)?,
        "squeeze" => x.squeeze_dims(&a.key("dims").ints())?,
        "flatten" => x.flatten(a.key("start").i(), a.key("end").i())?,
        "narrow" => x.narrow(dim, a.key("start").i(), a.key("length").i())?,
        "expand" => x.expand(&a.key("shape").ints())?,
        "permute" => x.permute(&a.key("dims").ints())?,
        "cat" => Var::cat(&[&x, &var(1)], dim)?,
        "stack" => Var::stack(&[&x, &var(1)], dim)?,
        "split" => {
            let pieces = if a.key("sections").is_null() {
                x.split(a.key("size").i(), dim)?
            } else {
                x.split(a.key("sections").ints(), dim)?
            };
            pieces[a.key("piece").i() as usize].clone()
        }
        "chunk" => x.chunk(a.key("chunks").i(), dim)?[a.key("piece").i() as usize].clone(),
        "matmul" => x.matmul(&var(1))?,
        "mm" => x.mm(&var(1))?,
        "addmm" => x.addmm(&var(1), &var(2))?,
        "linear" => {
            let b = (ins.len() > 2).then(|| var(2));
            x.linear(&var(1), b.as_ref())?
        }
        "layer_norm" => {
            let ns: Vec<usize> = a
                .key("normalized_shape")
                .ints()
                .iter()
                .map(|&d| d as usize)
                .collect();
            let mut k = 1;
            let w = a.key("weight").b().then(|| {
                k += 1;
                var(k - 1)
            });
            let b = a.key("bias").b().then(|| var(k));
            x.layer_norm(&ns, w.as_ref(), b.as_ref(), a.key("eps").f())?
        }
        "mse_loss" => {
            let w = (ins.len() > 2).then(|| ten(2));
            x.mse_loss(&var(1), reduction(a.key("reduction")), w.as_ref())?
        }
        "nll_loss" => {
            let w = (ins.len() > 2).then(|| ten(2));
            x.nll_loss(
                &ten(1),
                w.as_ref(),
                a.key("ignore_index").i(),
                reduction(a.key("reduction")),
            )?
        }
        "cross_entropy" => {
            let w = (ins.len() > 2).then(|| ten(2));
            x.cross_entropy(
                &ten(1),
                CrossEntropyArgs {
                    weight: w.as_ref(),
                    ignore_index: a.key("ignore_index").i(),
                    reduction: reduction(a.key("reduction")),
                    label_smoothing: a.key("label_smoothing").f(),
                },
            )?
        }
        "attention" => {
            let sc = a.key("scale");
            let args = AttentionArgs {
                scale: (!sc.is_null()).then(|| sc.f()),
                causal: a.key("causal").b(),
                saving: if a.key("saving").str() == "probs" {
                    AttentionSaving::SaveProbs
                } else {
                    AttentionSaving::Recompute
                },
            };
            x.attention(&var(1), &var(2), args)?
        }
        "gelu_linear" => {
            let b = (ins.len() > 2).then(|| var(2));
            let ap = if a.key("approximate").str() == "tanh" {
                GeluApprox::Tanh
            } else {
                GeluApprox::None
            };
            x.gelu_linear(ap, &var(1), b.as_ref())?
        }
        "dropout" => x.dropout(a.key("p").f(), a.key("train").b())?,
        "cast" => {
            let dt = match a.key("dtype").str() {
                "f16" => DType::F16,
                "bf16" => DType::BF16,
                _ => DType::F64,
            };
            x.to_dtype(dt)?.to_dtype(main_dtype(a))?
        }
        "softmax_cast" => {
            let narrow = |d: &str| match d {
                "f16" => Some(DType::F16),
                "bf16" => Some(DType::BF16),
                _ => None,
            };
            let xi = match narrow(a.key("src").str()) {
                Some(dt) => x.to_dtype(dt)?,
                None => x,
            };
            let dt = if a.key("dtype").str() == "f64" {
                DType::F64
            } else {
                main_dtype(a)
            };
            let y = if a.key("fn").str() == "log_softmax" {
                xi.log_softmax(dim, Some(dt))?
            } else {
                xi.softmax(dim, Some(dt))?
            };
            y.to_dtype(main_dtype(a))?
        }
        "view_chain" => {
            let mut t = x;
            for v in a.key("steps").arr() {
                t = view_step(&t, v)?;
            }
            t
        }
        "inplace_view" => {
            // Events on a fresh non-leaf (`x + 0`, contiguous where the
            // generator made it so), as the generator: take a chain of views
            // of the base or of an earlier view, or run an in-place op on
            // one (in no_grad mode where the step says so; a take's own flag
            // says whether that view is taken in it).
            let base = x.add(0.0)?;
            let base = if env.contiguous_base() {
                base.contiguous()?
            } else {
                base
            };
            let no_grad = a.key("no_grad").b();
            let mut views: Vec<Var> = Vec::new();
            for e in a.key("events").arr() {
                if !e.key("take").is_null() {
                    let _guard = e.key("no_grad").b().then(NoGradGuard::new);
                    let mut t = match usize::try_from(e.key("from").i()) {
                        Ok(k) => views[k].clone(),
                        Err(_) => base.clone(),
                    };
                    for v in e.key("take").arr() {
                        t = view_step(&t, v)?;
                    }
                    views.push(t);
                    continue;
                }
                let v = &views[e.key("chain").i() as usize];
                let c = e.key("c").f();
                let operand = || var(e.key("operand").i() as usize);
                let _guard = no_grad.then(NoGradGuard::new);
                match e.key("op").str() {
                    "add_" => v.add_(&operand())?,
                    "sub_" => v.sub_(&operand())?,
                    "mul_" => v.mul_(&operand())?,
                    "div_" => v.div_(&operand())?,
                    "zero_" => v.zero_()?,
                    "add_scalar_" => v.add_(c)?,
                    "mul_scalar_" => v.mul_(c)?,
                    _ => v.div_(c)?,
                };
            }
            match usize::try_from(a.key("out").i()) {
                Ok(k) => views[k].clone(),
                Err(_) => base,
            }
        }
        "inplace" => {
            // In place on a fresh non-leaf (`x + 0`), as the generator.
            let y = x.add(0.0)?;
            match a.key("op").str() {
                "add_" => y.add_(&var(1))?,
                "sub_" => y.sub_(&var(1))?,
                "mul_" => y.mul_(&var(1))?,
                "div_" => y.div_(&var(1))?,
                "zero_" => y.zero_()?,
                "mul_scalar_" => y.mul_(a.key("c").f())?,
                _ => y.div_(a.key("c").f())?,
            };
            y
        }
        "checkpoint" => {
            let name = a.key("fn").str().to_string();
            strata_autograd::checkpoint(
                move |t: &[Var]| {
                    let t = &t[0];
                    Ok(match name.as_str() {
                        "identity" => t.clone(),
                        "sin_mul" => t.mul(&t.sin()?)?,
                        "exp" => t.exp()?,
                        "tanh" => t.tanh()?,
                        "relu" => t.relu()?,
                        "abs" => t.abs()?,
                        "sqrt" => t.sqrt()?,
                        _ => t.neg()?,
                    })
                },
                std::slice::from_ref(&x),
            )?
        }
        "ckpt_steps" => {
            // A checkpoint of a sub-program (leaves made in it are captured
            // parameters).
            let (a, env, dtypes) = (a.clone(), env.clone(), dtypes.clone());
            strata_autograd::checkpoint(
                move |t: &[Var]| {
                    sub_program(t[0].clone(), &a, &env, &dtypes)
                        .map_err(|e| AutogradError::Checkpoint { msg: e.0 })
                },
                std::slice::from_ref(&x),
            )?
        }
        "autocast_steps" => {
            let y = {
                let _region = AutocastGuard::new(DeviceType::Cpu, DType::BF16)?;
                sub_program(x, a, env, dtypes)?
            };
            y.to_dtype(DType::F32)?
        }
        "detach_mix" => x.mul(a.key("c").f())?.add(&x.detach())?,
        // Session 44's families (seeds >= 181).
        "seq" => sub_program(x, a, env, dtypes)?,
        "to_dtype" => x.to_dtype(dtype_of(a.key("dtype").str()))?,
        "to_main" => x.to_dtype(DType::F32)?,
        "inplace_after" => {
            // y = x + 0; z = f(y) (or f(y, w)); an in-place op on y,
            // y.detach() or z.detach(); z and y combined.
            let y = x.add(0.0)?;
            let f = a.key("fn").str();
            let z = match f.strip_suffix("_leaf") {
                Some("rdiv") => var(a.key("w").i() as usize).div(&y)?,
                Some(g) => run_step(
                    g,
                    &[Val::V(y.clone()), ins[a.key("w").i() as usize].clone()],
                    &J::Null,
                    env,
                    dtypes,
                )?,
                None if f == "mul_self" => y.mul(&y)?,
                None => run_step(f, &[Val::V(y.clone())], &J::Null, env, dtypes)?,
            };
            let t = match a.key("target").str() {
                "y_detach" => y.detach(),
                "z_detach" => z.detach(),
                _ => y.clone(),
            };
            let operand = || var(a.key("operand").i() as usize);
            match a.key("op").str() {
                "add_" => t.add_(&operand())?,
                "sub_" => t.sub_(&operand())?,
                "mul_" => t.mul_(&operand())?,
                "div_" => t.div_(&operand())?,
                "zero_" => t.zero_()?,
                "mul_scalar_" => t.mul_(a.key("c").f())?,
                _ => t.add_(a.key("c").f())?,
            };
            match a.key("combine").str() {
                "add" => z.add(&y)?,
                "mul" => z.mul(&y)?,
                "cat" => Var::cat(&[&z, &y], dim)?,
                _ => Var::stack(&[&z, &y], dim)?,
            }
        }
        "leaf_nograd" => {
            // y = f(x, w), then w modified in place under no_grad.
            let w = var(1);
            let y = match a.key("fn").str() {
                "rdiv" => w.div(&x)?,
                f => run_step(f, ins, &J::Null, env, dtypes)?,
            };
            {
                let _g = NoGradGuard::new();
                match a.key("op").str() {
                    "zero_" => w.zero_()?,
                    "add_" => w.add_(a.key("c").f())?,
                    _ => w.mul_(a.key("c").f())?,
                };
            }
            y
        }
        "cumsum_dtype" => x.cumsum(dim, Some(DType::F64))?.to_dtype(DType::F32)?,
        other => panic!("the generator wrote an op this replay does not know: {other}"),
    })
}

/// The dtype a `cast`/`softmax_cast` step returns to: the program's (f32),
/// or, inside a `lowp` sub-program of seeds >= 181, that sub-program's
/// (`to`).
fn main_dtype(a: &J) -> DType {
    let to = a.key("to").str();
    if to.is_empty() {
        DType::F32
    } else {
        dtype_of(to)
    }
}

/// One view op of the generator's `view_chain`/`inplace_view` chains (or
/// an op that returns its input itself: dropout without a mask, a cast to
/// the same dtype).
fn view_step(t: &Var, v: &J) -> strata_autograd::Result<Var> {
    let i = |k: &str| v.key(k).i();
    match v.key("op").str() {
        "narrow" => t.narrow(i("dim"), i("start"), i("length")),
        "transpose" => t.transpose(i("d0"), i("d1")),
        "permute" => t.permute(&v.key("dims").ints()),
        "unsqueeze" => t.unsqueeze(i("dim")),
        "squeeze" => t.squeeze_dims(&v.key("dims").ints()),
        "t" => t.t(),
        "reshape" => t.reshape(&v.key("shape").ints()),
        "view" => t.view(&v.key("shape").ints()),
        "flatten" => t.flatten(i("start"), i("end")),
        "expand" => t.expand(&v.key("shape").ints()),
        "dropout" => t.dropout(v.key("p").f(), v.key("train").b()),
        "to_same" => t.to_dtype(t.dtype()),
        other => panic!("the generator wrote a view op this replay does not know: {other}"),
    }
}

/// How closely strata must agree with PyTorch.
#[derive(Clone, Copy)]
struct Tol {
    /// Bit for bit (an exact program; -0.0 == 0.0, NaN == NaN).
    exact: bool,
    /// The dtype the tensor is stored in (compared in f32): bf16 and f16
    /// values may also be one unit in the last place of it apart (a
    /// training program's parameters and gradients: a rounding of the
    /// update that falls the other way).
    store: DType,
    /// The program ran steps under autocast (bf16): each result may also be
    /// 2^-6 of its magnitude plus the tensor's largest apart. The error
    /// estimate (PyTorch's f32 answer against its f64 one, which autocast
    /// leaves alone) measures how far PyTorch's bf16 roundings took its
    /// answer, not strata's, which round at other places (strata's
    /// attention keeps its probabilities in f32, PyTorch's eager math
    /// rounds them to bf16).
    loose: bool,
}

impl Tol {
    /// A program's tolerance for its f32 tensors.
    fn of(p: &J) -> Tol {
        Tol {
            exact: p.key("exact").b(),
            store: DType::F32,
            // (sub-programs whose every result was f64 round nothing more
            // than f32 programs; only seeds >= 181 write those)
            loose: p
                .key("dtypes")
                .as_object()
                .is_some_and(|d| !d.is_empty() && !d.values().all(|v| v.str() == "f64")),
        }
    }

    fn stored(self, store: DType) -> Tol {
        Tol { store, ..self }
    }
}

/// `got` against PyTorch's `want` (shape, dtype `tol.store`, then
/// elements). `err` (inexact programs): per element, how far PyTorch's f32
/// answer is from its f64 answer to the same program; strata may be off by
/// twice that too (inf: anything but a NaN where PyTorch's f32 answer is
/// finite goes).
fn compare(what: &str, got: &Tensor, want: &J, err: &J, tol: Tol) -> Result<(), String> {
    // Seeds >= 181 name a tensor's dtype where it is not f32 (the gradient
    // of an f64/bf16/f16 leaf).
    let tol = match want.key("dtype").str() {
        d @ ("f64" | "bf16" | "f16") => tol.stored(dtype_of(d)),
        _ => tol,
    };
    let shape: Vec<usize> = want
        .key("shape")
        .arr()
        .iter()
        .map(|x| x.i() as usize)
        .collect();
    if got.shape() != shape.as_slice() {
        return Err(format!(
            "{what}: shape {:?}, PyTorch {shape:?}",
            got.shape()
        ));
    }
    if got.dtype() != tol.store {
        return Err(format!(
            "{what}: dtype {:?}, PyTorch {:?}",
            got.dtype(),
            tol.store
        ));
    }
    let (ulp, tiny) = match tol.store {
        DType::BF16 => (2f32.powi(-7), 2f32.powi(-133)),
        DType::F16 => (2f32.powi(-10), 2f32.powi(-24)),
        _ => (0.0, 0.0),
    };
    let g = got
        .to_dtype(DType::F32)
        .and_then(|t| t.to_vec::<f32>())
        .map_err(|e| e.to_string())?;
    let w: Vec<f32> = want
        .key("data")
        .arr()
        .iter()
        .map(|x| x.f() as f32)
        .collect();
    let scale = w
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f32, |m, v| m.max(v.abs()));
    let err: Vec<f64> = (err.arr().iter())
        .map(|x| if x.is_null() { 0.0 } else { x.f() })
        .collect();
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let e = err.get(i).copied().unwrap_or(0.0);
        let loose = if tol.loose {
            2f32.powi(-6) * (b.abs() + scale)
        } else {
            0.0
        };
        let ok = if e == f64::INFINITY {
            true
        } else if a.is_nan() || b.is_nan() {
            a.is_nan() && b.is_nan()
        } else if (tol.exact && ulp == 0.0 && !tol.loose) || !b.is_finite() {
            a == b
        } else {
            f64::from((a - b).abs())
                <= f64::from(1e-5 * b.abs() + 1e-6 * scale + ulp * b.abs() + tiny + loose) + 2.0 * e
        };
        if !ok {
            return Err(format!("{what}[{i}]: strata {a:e}, PyTorch {b:e}"));
        }
    }
    Ok(())
}

/// `got` (a gradient, or none) against PyTorch's (`null`: none).
fn compare_opt(what: &str, got: Option<Tensor>, want: &J, err: &J, tol: Tol) -> Result<(), String> {
    match (got, want.is_null()) {
        (None, true) => Ok(()),
        (Some(g), false) => compare(what, &g, want, err, tol),
        (Some(_), true) => Err(format!("{what}: strata has one, PyTorch None")),
        (None, false) => Err(format!("{what}: strata None, PyTorch has one")),
    }
}

/// The inputs of a program: constants as tensors, the others (leaves) as
/// parameters, each made by `leaf` from its tensor.
fn load_inputs(
    p: &J,
    mut leaf: impl FnMut(&str, Tensor) -> Result<Var, String>,
) -> Result<(Env, Vec<(String, Var)>), String> {
    let seed = p.key("id").str().split(':').next().unwrap_or("");
    let mut env = Env {
        seed: seed
            .parse()
            .map_err(|_| format!("program id {:?} names no seed", p.key("id").str()))?,
        ..Env::default()
    };
    let mut leaves = Vec::new();
    if let J::Object(ins) = p.key("inputs") {
        for (name, j) in ins {
            let t = tensor(j);
            if j.key("grad").b() {
                let v = leaf(name, t)?;
                leaves.push((name.clone(), v.clone()));
                env.insert(name.clone(), Val::V(v));
            } else {
                env.insert(name.clone(), Val::T(t));
            }
        }
    }
    Ok((env, leaves))
}

fn parameter(_: &str, t: Tensor) -> Result<Var, String> {
    Var::parameter(t).map_err(|e| e.to_string())
}

/// Runs a program's steps on `env`; returns its output.
/// The program's leaves (made parameters) and its forward run, whose output
/// is checked against PyTorch's: the environment, leaves, output and the
/// program's tolerance.
#[allow(clippy::type_complexity)]
fn checked_forward(p: &J) -> Result<(Env, Vec<(String, Var)>, Var, Tol), String> {
    let (mut env, leaves) = load_inputs(p, parameter)?;
    let out = forward(p, &mut env)?;
    let tol = Tol::of(p);
    compare(
        "forward",
        out.data(),
        p.key("expect_out"),
        p.key("err_out"),
        tol,
    )?;
    Ok((env, leaves, out, tol))
}

fn forward(p: &J, env: &mut Env) -> Result<Var, String> {
    run_steps(p.key("steps").arr(), env, p.key("dtypes")).map_err(|e| e.0)?;
    var_of(env, p.key("out").str()).map_err(|e| e.0)
}

/// `up` (a tensor, or null for none) as an upstream gradient.
fn upstream(up: &J) -> Option<Tensor> {
    (!up.is_null()).then(|| tensor(up))
}

fn run_program(p: &J) -> Result<(), String> {
    match p.key("kind").str() {
        "train" => return run_train(p),
        "api" => return run_api(p),
        _ => {}
    }
    let (_env, leaves, out, tol) = checked_forward(p)?;
    let up = p.key("upstream");
    let backward = |retain: bool| {
        if up.is_null() {
            out.sum(None, false)
                .and_then(|s| s.backward_with(None, retain))
        } else {
            out.backward_with(Some(&tensor(up)), retain)
        }
    };
    // Seeds >= 181: a second pass after a first with retain_graph, or
    // without it.
    let second = p.key("second_pass").str();
    let mut r = backward(second == "retain");
    // The gradients strata's passes give are multiplied by this before
    // comparing (see below).
    let mut times = 1.0;
    if !second.is_empty() && r.is_ok() {
        r = backward(false);
        if second == "released"
            && p.key("expect_error").is_null()
            && matches!(
                r,
                Err(AutogradError::GraphReleased {
                    op: "CheckpointBackward"
                })
            )
        {
            // A difference left (session 44): PyTorch's non-reentrant
            // checkpoint is transparent, so a second pass after a release
            // runs through it where the function's ops saved nothing
            // (`checkpoint(neg, x)`); strata's checkpoint node keeps the
            // function's inputs for its recomputation and refuses any
            // second pass after a release (strata checks every node before
            // a pass runs anything, so its gradients are the first pass's:
            // half of PyTorch's two).
            r = Ok(());
            times = 2.0;
        }
        if p.key("expect_error").str() == "graph_released" {
            return match r {
                Err(AutogradError::GraphReleased { .. }) => Ok(()),
                Err(e) => Err(format!(
                    "second backward: error {e}, PyTorch: graph released"
                )),
                Ok(()) => Err("second backward succeeded, PyTorch: graph released".into()),
            };
        }
    }
    if p.key("expect_error").str() == "saved_modified" {
        // PyTorch's backward failed: a tensor saved for backward was
        // modified in place (seeds >= 181, `inplace_after`).
        return match r {
            Err(AutogradError::SavedTensorModified { .. }) => Ok(()),
            Err(e) => Err(format!(
                "backward: error {e}, PyTorch: saved tensor modified"
            )),
            Ok(()) => Err("backward succeeded, PyTorch: saved tensor modified".into()),
        };
    }
    r.map_err(|e| format!("backward: error {e}"))?;
    for (name, v) in &leaves {
        let want = p.key("expect_grads").key(name);
        let err = p.key("err_grads").key(name);
        let got = match v.grad() {
            Some(g) if times != 1.0 => Some(g.mul(times).map_err(|e| e.to_string())?),
            g => g,
        };
        compare_opt(&format!("grad {name}"), got, want, err, tol)?;
    }
    Ok(())
}

/// The optimizer of a training program.
fn optimizer(o: &J, params: Vec<Var>) -> strata_autograd::Result<Box<dyn Optimizer>> {
    let lr = o.key("lr").f();
    // Session 45's options (seeds >= 208), absent before: PyTorch's defaults.
    let or = |k: &str, default: f64| match o.key(k) {
        J::Null => default,
        v => v.f(),
    };
    let (maximize, amsgrad) = (o.key("maximize").b(), o.key("amsgrad").b());
    Ok(match o.key("name").str() {
        "sgd" => Box::new(
            Sgd::new(params, lr, o.key("momentum").f())?
                .with_weight_decay(o.key("weight_decay").f())?
                .with_dampening(or("dampening", 0.0))?
                .with_nesterov(o.key("nesterov").b())?
                .with_maximize(maximize),
        ),
        // `fused`: how a GradScaler drives the step (PyTorch's fused
        // optimizers take its scale; strata's step is the fused kernel
        // either way).
        "adam" => Box::new(
            Adam::new(params, lr)?
                .with_betas(o.key("beta1").f(), o.key("beta2").f())?
                .with_eps(o.key("eps").f())?
                .with_amsgrad(amsgrad)?
                .with_maximize(maximize)
                .with_fused(o.key("fused").b()),
        ),
        _ => Box::new(
            AdamW::new(params)
                .with_lr(lr)?
                .with_betas(o.key("beta1").f(), o.key("beta2").f())?
                .with_eps(o.key("eps").f())?
                .with_weight_decay(o.key("weight_decay").f())?
                .with_amsgrad(amsgrad)?
                .with_maximize(maximize)
                .with_fused(o.key("fused").b()),
        ),
    })
}

/// A training program (the generator's `build_train`): the program's
/// leaves are parameters (stored in `train.store`'s dtype, read through a
/// cast to f32), trained `train.iters` iterations as the generator trains
/// them; each iteration's output, clip norm and scaler state, and the
/// parameters and their gradients at the end are PyTorch's.
fn run_train(p: &J) -> Result<(), String> {
    let t = p.key("train");
    let tol = Tol::of(p);
    let store = |name: &str| dtype_of(t.key("store").key(name).str());
    let (consts, _) = load_inputs(p, |name, x| {
        Var::parameter(x.to_dtype(store(name)).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())
    })?;
    let names: Vec<String> = t
        .key("params")
        .arr()
        .iter()
        .map(|n| n.str().to_string())
        .collect();
    let params = names
        .iter()
        .map(|n| var_of(&consts, n).map_err(|e| e.0))
        .collect::<Result<Vec<Var>, String>>()?;
    let e = |what: String| move |e: AutogradError| format!("{what}: error {e}");
    let mut opt = optimizer(t.key("optimizer"), params.clone()).map_err(e("optimizer".into()))?;
    let sc = t.key("scaler");
    let mut scaler = if sc.is_null() {
        None
    } else {
        Some(
            GradScaler::with_settings(
                sc.key("init_scale").f(),
                sc.key("growth_factor").f(),
                sc.key("backoff_factor").f(),
                sc.key("growth_interval").i() as u32,
            )
            .map_err(e("GradScaler".into()))?,
        )
    };
    let clip = t.key("clip");
    let up = upstream(p.key("upstream"));
    let mut clips = 0;
    for it in 0..t.key("iters").i() as usize {
        let zg = t.key("zero_grad").str();
        if it > 0 && zg != "keep" {
            opt.zero_grad(zg == "none").map_err(e("zero_grad".into()))?;
        }
        let mut env = consts.clone();
        for (n, v) in names.iter().zip(&params) {
            let read = if v.dtype() == DType::F32 {
                v.clone()
            } else {
                v.to_dtype(DType::F32).map_err(e("cast".into()))?
            };
            env.insert(n.clone(), Val::V(read));
        }
        let out = forward(p, &mut env).map_err(|m| format!("iteration {it}: {m}"))?;
        compare(
            &format!("iteration {it}: forward"),
            out.data(),
            &p.key("expect_outs").arr()[it],
            &p.key("err_outs").arr().get(it).cloned().unwrap_or(J::Null),
            tol,
        )?;
        let loss = match &up {
            Some(_) => out,
            None => out.sum(None, false).map_err(e("sum".into()))?,
        };
        let loss = match &scaler {
            Some(s) => s.scale(&loss).map_err(e("scale".into()))?,
            None => loss,
        };
        loss.backward_with(up.as_ref(), false)
            .map_err(e(format!("iteration {it}: backward")))?;
        let log = &p.key("expect_log").arr()[it];
        if !clip.is_null() {
            if let Some(s) = &mut scaler {
                s.unscale_(opt.as_ref()).map_err(e("unscale_".into()))?;
            }
            let norm =
                clip_grad_norm_(opt.params(), clip.f()).map_err(e("clip_grad_norm_".into()))?;
            let norm = norm.to_dtype(DType::F32).map_err(|e| e.to_string())?;
            let want = serde_json::json!({"shape": [], "data": [log.key("norm")]});
            let err = serde_json::json!([p.key("err_norms").arr().get(clips)]);
            compare(
                &format!("iteration {it}: clip norm"),
                &norm,
                &want,
                &err,
                tol,
            )?;
            clips += 1;
        }
        match &mut scaler {
            Some(s) => {
                let stepped = s.step(opt.as_mut()).map_err(e("GradScaler::step".into()))?;
                s.update().unwrap();
                if stepped != log.key("stepped").b() {
                    return Err(format!(
                        "iteration {it}: GradScaler stepped {stepped}, PyTorch's {}",
                        log.key("stepped").b()
                    ));
                }
                let want = log.key("scale").f();
                if (s.get_scale() - want).abs() > 1e-6 * want.abs() {
                    return Err(format!(
                        "iteration {it}: GradScaler scale {}, PyTorch's {want}",
                        s.get_scale()
                    ));
                }
            }
            None => opt.step().map_err(e(format!("iteration {it}: step")))?,
        }
    }
    for (n, v) in names.iter().zip(&params) {
        let want = p.key("expect_params").key(n);
        let err = p.key("err_params").key(n);
        let tol = tol.stored(store(n));
        compare(&format!("param {n}"), v.data(), want, err, tol)?;
        if t.key("grads_checked").b() {
            let want = p.key("expect_grads").key(n);
            let err = p.key("err_grads").key(n);
            compare_opt(&format!("grad {n}"), v.grad(), want, err, tol)?;
        }
    }
    Ok(())
}

/// A program of the gradient API (the generator's `build_api`): after the
/// forward, its actions (retain_grad, tensor hooks that scale a gradient,
/// post-accumulate-grad hooks that scale `.grad`, zero_grad, backward and
/// grad passes), then the leaves' `.grad`, the retained gradients and what
/// each `grad` returned are PyTorch's.
fn run_api(p: &J) -> Result<(), String> {
    let (env, leaves, _out, tol) = checked_forward(p)?;
    let get = |n: &J| var_of(&env, n.str()).map_err(|e| e.0);
    let e = |what: &'static str| move |e: AutogradError| format!("{what}: error {e}");
    let mut grads_calls = 0;
    for a in p.key("actions").arr() {
        let c = a.key("c").f();
        match a.key("act").str() {
            "retain_grad" => get(a.key("on"))?.retain_grad().map_err(e("retain_grad"))?,
            "hook" => {
                get(a.key("on"))?
                    .register_hook(move |g| Ok(Some(g.mul(c)?)))
                    .map_err(e("register_hook"))?;
            }
            "post_hook" => {
                get(a.key("on"))?
                    .register_post_accumulate_grad_hook(move |v| {
                        if let Some(g) = v.grad() {
                            g.mul_(c)?;
                        }
                        Ok(())
                    })
                    .map_err(e("register_post_accumulate_grad_hook"))?;
            }
            "zero_grad" => get(a.key("on"))?
                .zero_grad(a.key("none").b())
                .map_err(e("zero_grad"))?,
            act => {
                let outs = a
                    .key("outputs")
                    .arr()
                    .iter()
                    .map(get)
                    .collect::<Result<Vec<Var>, String>>()?;
                let outs: Vec<&Var> = outs.iter().collect();
                let ups: Vec<Option<Tensor>> = a.key("ups").arr().iter().map(upstream).collect();
                let ups: Vec<Option<&Tensor>> = ups.iter().map(Option::as_ref).collect();
                let retain = a.key("retain").b();
                if act == "backward" {
                    strata_autograd::backward(&outs, &ups, retain).map_err(e("backward"))?;
                    continue;
                }
                let ins = a
                    .key("inputs")
                    .arr()
                    .iter()
                    .map(get)
                    .collect::<Result<Vec<Var>, String>>()?;
                let ins: Vec<&Var> = ins.iter().collect();
                let args = GradArgs {
                    retain_graph: retain,
                    allow_unused: a.key("allow_unused").b(),
                    materialize_grads: a.key("materialize").b(),
                };
                let got = grad_with(&outs, &ups, &ins, args).map_err(e("grad"))?;
                let want = &p.key("expect_returned").arr()[grads_calls];
                let err = p.key("err_returned").arr().get(grads_calls);
                for (i, g) in got.into_iter().enumerate() {
                    let err = err.map_or(&J::Null, |x| x.arr().get(i).unwrap_or(&J::Null));
                    let what = format!("grad call {grads_calls}, input {i}");
                    compare_opt(&what, g, &want.arr()[i], err, tol)?;
                }
                grads_calls += 1;
            }
        }
    }
    for (name, v) in &leaves {
        let want = p.key("expect_grads").key(name);
        let err = p.key("err_grads").key(name);
        compare_opt(&format!("grad {name}"), v.grad(), want, err, tol)?;
    }
    if let J::Object(kept) = p.key("expect_retained") {
        for (name, want) in kept {
            let v = var_of(&env, name).map_err(|e| e.0)?;
            let err = p.key("err_retained").key(name);
            compare_opt(&format!("retained grad {name}"), v.grad(), want, err, tol)?;
        }
    }
    Ok(())
}

/// The ops of a program, for the report.
fn ops_of(p: &J) -> String {
    let steps = steps_str(p.key("steps"));
    match p.key("kind").str() {
        "train" => format!("train{} {steps}", args_str(p.key("train"))),
        "api" => {
            let acts: Vec<String> = (p.key("actions").arr().iter())
                .map(|a| format!("{}{}", a.key("act").str(), args_str(a)))
                .collect();
            format!("{steps} then {}", acts.join(", "))
        }
        _ => steps,
    }
}

fn steps_str(steps: &J) -> String {
    steps
        .arr()
        .iter()
        .map(|s| {
            let a = s.key("args");
            if a.key("steps").is_array() {
                format!("{}[{}]", s.key("op").str(), steps_str(a.key("steps")))
            } else {
                format!("{}{}", s.key("op").str(), args_str(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

fn args_str(a: &J) -> String {
    match a {
        J::Object(v) if !v.is_empty() => format!(
            "({})",
            v.iter()
                .map(|(k, x)| format!("{k}={}", short(x)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => String::new(),
    }
}

fn short(x: &J) -> String {
    match x {
        J::Null => "None".into(),
        J::Bool(b) => b.to_string(),
        J::Number(n) => n.to_string(),
        J::String(s) => s.clone(),
        J::Array(v) => format!("[{}]", v.iter().map(short).collect::<Vec<_>>().join(",")),
        J::Object(v) if v.contains_key("data") => "<tensor>".into(),
        J::Object(_) => args_str(x),
    }
}

fn replay(files: &[PathBuf]) -> (usize, Vec<String>) {
    let mut n = 0;
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let doc: J = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for p in doc.key("programs").arr() {
            n += 1;
            if let Err(e) = run_program(p) {
                bad.push(format!("{} [{}]: {e}", p.key("id").str(), ops_of(p)));
            }
        }
    }
    (n, bad)
}

fn report(n: usize, bad: &[String]) {
    for b in bad.iter().take(60) {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {n} programs differ from PyTorch (first ones above)",
        bad.len()
    );
    eprintln!("{n} programs agree with PyTorch");
}

#[test]
fn checked_in_programs_match_pytorch() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grad_oracle.json");
    let (n, bad) = replay(&[f]);
    assert!(n >= 100, "only {n} programs in grad_oracle.json");
    report(n, &bad);
}

#[test]
fn programs_of_the_oracle_dir_match_pytorch() {
    let Some(dir) = std::env::var_os("STRATA_GRAD_ORACLE_DIR") else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (n, bad) = replay(&files);
    report(n, &bad);
}

/// Found by the oracle: where the exponent is 0, PyTorch's base gradient is
/// 0 even where the upstream gradient is NaN or infinite
/// (`where(y == 0, 0, g * y * x^(y-1))`); strata multiplied `g` by the
/// masked derivative, which gave NaN. Expected values from PyTorch 2.15:
///
/// ```python
/// x = torch.tensor([2.0, 0.0, -1.5], requires_grad=True)
/// y = torch.tensor([0.0, 0.0, 2.0], requires_grad=True)
/// (torch.pow(x, y) * torch.tensor([nan, inf, 1.0])).sum().backward()
/// x.grad  # [0.0, 0.0, -3.0]
/// y.grad  # [nan, nan, nan]
/// ```
#[test]
fn pow_base_gradient_is_zero_where_the_exponent_is_zero_even_for_a_nan_upstream() {
    let t = |v: &[f32]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    let x = Var::parameter(t(&[2.0, 0.0, -1.5])).unwrap();
    let y = Var::parameter(t(&[0.0, 0.0, 2.0])).unwrap();
    let c = Var::new(t(&[f32::NAN, f32::INFINITY, 1.0]));
    let loss = x
        .pow(&y)
        .unwrap()
        .mul(&c)
        .unwrap()
        .sum(None, false)
        .unwrap();
    loss.backward().unwrap();
    let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(gx, vec![0.0, 0.0, -3.0]);
    let gy = y.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(gy.iter().all(|v| v.is_nan()), "{gy:?}");
}

/// Found by the oracle: the variance over every element with no degree of
/// freedom left has the gradient `g * where(x == mean, NaN, inf)`; strata
/// compared `x - mean` with 0, which is NaN (not 0) for an infinite `x`
/// equal to an infinite mean, and gave inf. Expected values from PyTorch
/// 2.15:
///
/// ```python
/// x = torch.tensor([inf, 1.0], requires_grad=True)
/// x.var(correction=2).backward()
/// x.grad  # [nan, inf]
/// ```
#[test]
fn var_gradient_without_degrees_of_freedom_is_nan_where_an_infinite_x_equals_the_mean() {
    let x = Var::parameter(Tensor::from_slice(&[f32::INFINITY, 1.0], &[2], Device::Cpu).unwrap())
        .unwrap();
    x.var(None, 2.0, false).unwrap().backward().unwrap();
    let g = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(g[0].is_nan(), "{g:?}");
    assert_eq!(g[1], f32::INFINITY);
}

/// Found by the oracle (seed 167, an `inplace_view` step in no_grad mode):
/// `flatten(start, end)` with `start == end` (after wrapping) returns the
/// input itself in PyTorch (`if (start_dim == end_dim) return self;`), not
/// a view of it, so taken in no_grad mode it still requires grad and has
/// the input's history; strata made a view, which in no_grad mode did not
/// require grad, and the gradient through it was lost. Expected values
/// from PyTorch 2.15:
///
/// ```python
/// x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
/// y = x * 2
/// with torch.no_grad():
///     f = y.flatten(1, 1)       # f is y; MulBackward0
/// (f * 3).sum().backward()
/// x.grad  # [[6., 6.], [6., 6.]]
/// x1 = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
/// y1 = x1 * 1.5
/// with torch.no_grad():
///     f1 = y1.flatten()         # 1-D: start 0 == end 0, f1 is y1
/// (f1 * f1).sum().backward()
/// x1.grad  # [4.5, -9.0, 2.25]
/// ```
#[test]
fn flatten_with_start_equal_to_end_is_the_input_itself_even_in_no_grad_mode() {
    let x =
        Var::parameter(Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap())
            .unwrap();
    let y = x.mul(2.0).unwrap();
    let f = strata_autograd::no_grad(|| y.flatten(1, 1)).unwrap();
    assert!(f.requires_grad());
    assert_eq!(f.grad_fn_name(), y.grad_fn_name());
    f.mul(3.0)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![6.0; 4]);

    let x1 = Var::parameter(Tensor::from_slice(&[1.0f32, -2.0, 0.5], &[3], Device::Cpu).unwrap())
        .unwrap();
    let y1 = x1.mul(1.5).unwrap();
    let f1 = strata_autograd::no_grad(|| y1.flatten(0, -1)).unwrap();
    f1.mul(&f1)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        x1.grad().unwrap().to_vec::<f32>().unwrap(),
        vec![4.5, -9.0, 2.25]
    );
    // A 0-d input still becomes [1] (PyTorch's `reshape({1})`), and bad
    // dims are still refused.
    let s = Var::parameter(Tensor::from_slice(&[2.0f32], &[], Device::Cpu).unwrap()).unwrap();
    assert_eq!(s.flatten(0, -1).unwrap().shape(), &[1]);
    assert!(y.flatten(1, 0).is_err());
    assert!(y.flatten(2, 2).is_err());
}

/// Found while triaging the flatten case above: dropout that draws no mask
/// (not training, `p` = 0, or no element) returns the input itself in
/// PyTorch (`_dropout_impl`: `if (p == 0 || !train || numel == 0) return
/// input;`), so an in-place op on its result is one on the input, and a
/// result taken in no_grad mode still requires grad. strata returned a new
/// variable sharing the input's storage: the in-place op changed the
/// input's value behind its history's back (a silently wrong gradient).
/// Expected values from PyTorch 2.15:
///
/// ```python
/// for p, train in [(0.0, True), (0.5, False)]:
///     x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
///     y = x * 2
///     d = F.dropout(y, p, train)    # d is y
///     d.mul_(3)
///     (y * y).sum().backward()
///     y, x.grad  # [6., 12., 18.], [72., 144., 216.]
/// x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
/// y = x * 2
/// with torch.no_grad():
///     d = F.dropout(y, 0.5, False)  # d is y, requires grad
/// (d * d).sum().backward()
/// x.grad  # [8., 16., 24.]
/// ```
#[test]
fn dropout_without_a_mask_is_the_input_itself() {
    let t = || Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
    for (p, train) in [(0.0, true), (0.5, false)] {
        let x = Var::parameter(t()).unwrap();
        let y = x.mul(2.0).unwrap();
        let d = y.dropout(p, train).unwrap();
        d.mul_(3.0).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0, 12.0, 18.0]);
        y.mul(&y)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec::<f32>().unwrap(),
            vec![72.0, 144.0, 216.0]
        );
    }
    let x = Var::parameter(t()).unwrap();
    let y = x.mul(2.0).unwrap();
    let d = strata_autograd::no_grad(|| y.dropout(0.5, false)).unwrap();
    assert!(d.requires_grad());
    d.mul(&d)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>().unwrap(),
        vec![8.0, 16.0, 24.0]
    );
    // A bad p is still refused, training or not (PyTorch's F.dropout checks
    // it first).
    assert!(y.dropout(1.5, false).is_err());
    assert!(y.dropout(-0.1, true).is_err());
}
