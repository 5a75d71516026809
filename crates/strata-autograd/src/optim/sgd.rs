//! Stochastic gradient descent (PyTorch's `SGD`, its single-tensor step):
//!
//! ```text
//! g = -g                                     (maximize)
//! g = g + weight_decay * p                   (weight_decay != 0)
//! buf = g                                    (momentum != 0, first step)
//! buf = momentum * buf + (1 - dampening) * g (momentum != 0, later steps)
//! g = g + momentum * buf                     (nesterov)
//! g = buf                                    (momentum != 0, not nesterov)
//! p = p - lr * g
//! ```
//!
//! Each `a.add(b, alpha=c)` of PyTorch's step (`grad.add(param,
//! alpha=weight_decay)`, `buf.add_(grad, alpha=1 - dampening)`,
//! `grad.add(buf, alpha=momentum)` and `param.add_(buf, alpha=-lr)`)
//! converts `alpha` to the tensor's dtype (f32 0.1 is 0.100000001490116,
//! bf16 0.1 is 0.10009765625) and rounds `a + alpha * b` once: a fused
//! multiply-add, in f32 for f16/bf16 and in the dtype for f32 and f64
//! (checked against PyTorch 2.15 on the CPU for f32 and f64 tensors of 1 to
//! 1000 elements: its vectorized loop calls `fmadd` and its compiler
//! contracts the scalar loop's `a + alpha * b` alike). strata did so for
//! f16/bf16 only and formed `alpha * b` first for f32/f64: a parameter then
//! moved one unit in the last place away from PyTorch's now and then, which
//! was enough to break a tie of `minimum` between an f32 parameter and an
//! f64 one read as f32 (gradient-oracle program 196:1272). For f16/bf16
//! PyTorch rounds `alpha * b` to the dtype first in the scalar loop that
//! updates a tensor's last `numel % 32` elements (AVX2); strata does the
//! same on the CPU for contiguous tensors since session 53 (before, it
//! rounded once everywhere, as the vectorized loop), and since session 53's
//! second sweep for every layout: the last `size % 32` elements of each of
//! TensorIterator's inner rows, or every element where an operand is not
//! contiguous along them ([`scalar_mask`]), with SGD's intermediates laid
//! out as PyTorch's.

use super::state::{self, StateDict};
use super::{check, check_non_negative, Optimizer};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor};

/// `a + alpha * b` for float tensors, as PyTorch's `a.add(b, alpha)`
/// computes it (see the module docs): `alpha` converted to their dtype and
/// the sum rounded once. `addcmul(alpha, b, 1)` is `fma(1 * alpha, b, a)`
/// in the compute type of `addcmul` (f32 for f16/bf16; on the GPU too),
/// with an exact `1 * alpha`. For f16/bf16 tensors on the CPU the result
/// is laid out as PyTorch's (see [`reduced_cpu`]) and the elements that
/// PyTorch's scalar loop computes are rounded as there ([`scalar_mask`]).
fn add_scaled(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Tensor> {
    let once = a.addcmul(&alpha_of(a, alpha)?, b, 1.0)?;
    if !reduced_cpu(a, b) {
        return Ok(once);
    }
    if a.is_contiguous() && b.is_contiguous() {
        // One inner row: the scalar loop takes the last `numel % 32`.
        if let Some((start, tail)) = contiguous_tail(a, b, alpha)? {
            last(&once, start)?.copy_(&tail)?;
        }
        return Ok(once);
    }
    let order = iter_order(a.shape(), &[a.strides(), b.strides()])?;
    let out = empty_in_order(a, &order)?;
    match scalar_mask(
        a.shape(),
        &order,
        &[out.strides(), a.strides(), b.strides()],
    )? {
        Some(mask) => out.copy_(&Tensor::where_cond(
            &mask,
            &scalar_loop(a, b, alpha)?,
            &once,
        )?)?,
        None => out.copy_(&once)?,
    };
    Ok(out)
}

/// `p += alpha * b` in place, as [`add_scaled`].
fn add_scaled_(p: &Tensor, b: &Tensor, alpha: f64) -> Result<()> {
    if reduced_cpu(p, b) && p.is_contiguous() && b.is_contiguous() {
        // The tail is formed from `p`'s values before the update.
        let tail = contiguous_tail(p, b, alpha)?;
        p.addcmul_(&alpha_of(p, alpha)?, b, 1.0)?;
        if let Some((start, t)) = tail {
            last(p, start)?.copy_(&t)?;
        }
        return Ok(());
    }
    let mask = if reduced_cpu(p, b) {
        let order = iter_order(p.shape(), &[p.strides(), p.strides(), b.strides()])?;
        scalar_mask(p.shape(), &order, &[p.strides(), p.strides(), b.strides()])?
    } else {
        None
    };
    // The scalar loop's values are formed from `p`'s values before the
    // update.
    let scalar = match &mask {
        Some(_) => Some(scalar_loop(p, b, alpha)?),
        None => None,
    };
    p.addcmul_(&alpha_of(p, alpha)?, b, 1.0)?;
    if let (Some(mask), Some(scalar)) = (mask, scalar) {
        p.copy_(&Tensor::where_cond(&mask, &scalar, p)?)?;
    }
    Ok(())
}

/// For contiguous `a` and `b` (of [`reduced_cpu`]): `Some((start, the
/// scalar loop's values from start on))`, the last `numel % 32` elements,
/// or `None` when the vectorized loop takes them all.
fn contiguous_tail(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Option<(usize, Tensor)>> {
    let n = a.numel();
    let t = n % REDUCED_TAIL;
    if t == 0 {
        return Ok(None);
    }
    let start = n - t;
    let prod = last(b, start)?.mul(&alpha_of(a, alpha)?)?;
    Ok(Some((start, last(a, start)?.add(&prod)?)))
}

/// The elements of contiguous `t` from `start` on, as a 1-d view.
fn last(t: &Tensor, start: usize) -> Result<Tensor> {
    let n = t.numel();
    Ok(t.view(&[n as i64])?
        .narrow(0, start as i64, (n - start) as i64)?)
}

/// How many trailing elements of each inner row PyTorch's CPU kernels
/// leave to their scalar loop for f16 and bf16: `cpu_kernel_vec` steps two
/// vectors of 16 (AVX2, the CPU capability of the PyTorch 2.15 build the
/// fixtures come from) at a time and hands the last `size % 32` elements to
/// the scalar functor.
const REDUCED_TAIL: usize = 32;

/// Whether `a.add(b, alpha)` runs PyTorch's CPU kernel for f16/bf16 with
/// its two loops: the vectorized loop, which rounds once (as `addcmul`),
/// and the scalar functor, which rounds `alpha * b` to the dtype before the
/// sum (`c10::Half` and `c10::BFloat16` operators). Which elements take the
/// scalar functor depends on TensorIterator's layout ([`scalar_mask`]), so
/// SGD's intermediates (`-g`, `g + wd * p`, the momentum buffer) are laid
/// out as PyTorch's there ([`empty_in_order`], [`clone_as_pytorch`]).
/// f32/f64 round once in both loops, and the GPU's kernel once.
fn reduced_cpu(a: &Tensor, b: &Tensor) -> bool {
    matches!(a.dtype(), DType::F16 | DType::BF16)
        && a.device() == Device::Cpu
        && b.dtype() == a.dtype()
        && b.device() == a.device()
        && a.shape() == b.shape()
        && a.numel() > 0
}

/// `a + (alpha * b rounded to the dtype)`: PyTorch's scalar functor.
fn scalar_loop(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Tensor> {
    Ok(a.add(&b.mul(&alpha_of(a, alpha)?)?)?)
}

/// TensorIterator's order of the dims (innermost first) for operands of
/// one `shape` with these strides (an output being written first; one
/// being allocated left out): PyTorch's `reorder_dimensions`
/// ([`strata_tensor::layout::pytorch_reorder_dims`]).
fn iter_order(shape: &[usize], strides: &[&[usize]]) -> Result<Vec<usize>> {
    Ok(strata_tensor::layout::pytorch_reorder_dims(
        shape, None, strides,
    )?)
}

/// An uninitialised tensor of `like`'s shape, dtype and device, contiguous
/// along `order` (innermost first): how TensorIterator allocates an
/// out-of-place result.
fn empty_in_order(like: &Tensor, order: &[usize]) -> Result<Tensor> {
    let outer_first: Vec<usize> = order.iter().rev().copied().collect();
    let shape: Vec<usize> = outer_first.iter().map(|&d| like.shape()[d]).collect();
    let t = Tensor::empty(&shape, like.dtype(), like.device())?;
    let mut back = vec![0i64; order.len()];
    for (pos, &d) in outer_first.iter().enumerate() {
        back[d] = pos as i64;
    }
    Ok(t.permute(&back)?)
}

/// `t` in the layout PyTorch gives the result of an elementwise op of `t`
/// alone (`-g`: TensorIterator's order of `t`'s dims).
fn as_unary_result(t: &Tensor, result: Tensor) -> Result<Tensor> {
    let order = iter_order(t.shape(), &[t.strides()])?;
    let out = empty_in_order(t, &order)?;
    if out.strides() == result.strides() {
        return Ok(result);
    }
    out.copy_(&result)?;
    Ok(out)
}

/// PyTorch's `torch.clone(g)` (the first momentum buffer), which is
/// `preserve_format`: the strides of a dense `g`
/// (`is_non_overlapping_and_dense`), else dense in the order of `g`'s
/// strides (`infer_dense_strides`), as strata's [`Tensor::deep_clone`] lays it
/// out. Until session 59 a non-dense `g` (a `.grad` set to a view with gaps)
/// gave a row-major buffer, and since the buffer's layout decides which
/// elements of the later `add_`s take PyTorch's f16/bf16 scalar loop, a
/// transposed gradient with gaps moved a few elements an ulp away from
/// PyTorch's (`tests/suite/strides_s59.rs`).
fn clone_as_pytorch(g: &Tensor) -> Result<Tensor> {
    Ok(g.deep_clone()?)
}

/// Which elements of `a.add(b, alpha)` (of `shape`; `strides` those of the
/// output, `a` and `b`, the output allocated in `order`) PyTorch's CPU
/// kernel hands to its scalar functor, as a bool tensor of `shape` (`None`
/// when there is none; `strata_tensor::layout::pytorch_scalar_loop_mask`,
/// which f16/bf16 GELU uses too): TensorIterator coalesces the dims in `order`
/// (`coalesce_dimensions`), then runs each inner row with the vectorized
/// loop when every operand is contiguous along it (or one input has stride
/// 0 there and the others are contiguous), leaving the last
/// `size % 32` elements of the row to the scalar functor, and runs every
/// element with the scalar functor otherwise (`basic_loop`). Before this,
/// strata applied the tail only to contiguous tensors: a transposed f16
/// parameter, or a gradient of another layout than its parameter's, moved
/// an ulp away from PyTorch's now and then (`tests/suite/hostile_sweep_s53b.rs`).
fn scalar_mask(shape: &[usize], order: &[usize], strides: &[&[usize]]) -> Result<Option<Tensor>> {
    strata_tensor::layout::pytorch_scalar_loop_mask(shape, order, strides, REDUCED_TAIL)?
        .map(|mask| Ok(Tensor::from_vec(mask, shape, Device::Cpu)?))
        .transpose()
}

/// `alpha` as a 0-d tensor of `t`'s dtype on its device (PyTorch's
/// `alpha.to<scalar_t>()`).
fn alpha_of(t: &Tensor, alpha: f64) -> Result<Tensor> {
    Ok(Tensor::full(&[], alpha, t.dtype(), t.device())?)
}

/// What `dampening` accepts.
const DAMPENING: &str = "a number, not NaN (PyTorch's default 0; 1 - dampening scales each \
                         gradient added to the momentum buffer)";

/// SGD with optional momentum (with dampening or Nesterov's), weight decay
/// and maximization.
pub struct Sgd {
    params: Vec<Var>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    dampening: f64,
    nesterov: bool,
    maximize: bool,
    /// One momentum buffer per parameter, created at its first step.
    buffers: Vec<Option<Tensor>>,
}

/// A dampening is any number but NaN (PyTorch checks none).
fn check_dampening(dampening: f64) -> Result<()> {
    check(
        "SGD",
        "dampening",
        dampening,
        !dampening.is_nan(),
        DAMPENING,
    )
}

/// PyTorch's constructor rule: Nesterov momentum needs a momentum and no
/// dampening.
fn check_nesterov(nesterov: bool, momentum: f64, dampening: f64) -> Result<()> {
    if nesterov && !(momentum > 0.0 && dampening == 0.0) {
        return Err(AutogradError::OptimizerOptions {
            optimizer: "SGD",
            msg: format!(
                "Nesterov momentum requires a momentum and zero dampening (momentum = \
                 {momentum}, dampening = {dampening}); make the optimizer with a momentum > 0 \
                 and leave dampening at 0, or turn nesterov off"
            ),
        });
    }
    Ok(())
}

impl Sgd {
    /// SGD over `params` with learning rate `lr` and `momentum` (0 for plain
    /// SGD); no weight decay, no dampening, no Nesterov momentum, minimizing.
    pub fn new(params: Vec<Var>, lr: f64, momentum: f64) -> Result<Sgd> {
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        super::check_distinct("SGD", &params)?;
        let buffers = vec![None; params.len()];
        Ok(Sgd {
            params,
            lr,
            momentum,
            weight_decay: 0.0,
            dampening: 0.0,
            nesterov: false,
            maximize: false,
            buffers,
        })
    }

    /// Adds `weight_decay * p` to each gradient before the update.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Result<Sgd> {
        check_non_negative("SGD", "weight decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    /// PyTorch's `dampening` (default 0): after the first step, the momentum
    /// buffer becomes `momentum * buf + (1 - dampening) * g` (the first step
    /// still sets it to `g`, as PyTorch's). Any number but NaN, as PyTorch
    /// (which checks none; strata refuses NaN, which would make every
    /// weight NaN). A dampening other than 0 with Nesterov momentum is an
    /// [`AutogradError::OptimizerOptions`] error; without momentum it has
    /// no effect.
    pub fn with_dampening(mut self, dampening: f64) -> Result<Sgd> {
        check_dampening(dampening)?;
        check_nesterov(self.nesterov, self.momentum, dampening)?;
        self.dampening = dampening;
        Ok(self)
    }

    /// PyTorch's `nesterov` (default false): Nesterov momentum, stepping by
    /// `g + momentum * buf` instead of `buf`. Needs a momentum above 0 and
    /// no dampening (PyTorch's `ValueError` "Nesterov momentum requires a
    /// momentum and zero dampening"); otherwise an
    /// [`AutogradError::OptimizerOptions`] error.
    pub fn with_nesterov(mut self, nesterov: bool) -> Result<Sgd> {
        check_nesterov(nesterov, self.momentum, self.dampening)?;
        self.nesterov = nesterov;
        Ok(self)
    }

    /// PyTorch's `maximize` (default false): ascend the objective, stepping
    /// along the gradient (the step starts from `-g`, negated exactly).
    pub fn with_maximize(mut self, maximize: bool) -> Sgd {
        self.maximize = maximize;
        self
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate (for schedules; `>= 0`).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_non_negative("SGD", "learning rate", lr)?;
        self.lr = lr;
        Ok(())
    }

    /// Bytes held by the momentum buffers.
    pub fn state_bytes(&self) -> usize {
        self.buffers
            .iter()
            .flatten()
            .map(|b| b.numel() * b.dtype().size())
            .sum()
    }
}

impl Optimizer for Sgd {
    fn params(&self) -> &[Var] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        Sgd::set_lr(self, lr)
    }

    /// As for every optimizer; `dampening`, `nesterov` and `maximize` are
    /// written when they differ from their defaults (see [`StateDict`]).
    fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        d.insert(state::hyper_key("lr"), state::scalar(self.lr)?);
        d.insert(state::hyper_key("momentum"), state::scalar(self.momentum)?);
        d.insert(
            state::hyper_key("weight_decay"),
            state::scalar(self.weight_decay)?,
        );
        if self.dampening != 0.0 {
            d.insert(
                state::hyper_key("dampening"),
                state::scalar(self.dampening)?,
            );
        }
        state::write_flag(&mut d, "nesterov", self.nesterov)?;
        state::write_flag(&mut d, "maximize", self.maximize)?;
        for (i, b) in self.buffers.iter().enumerate() {
            if let Some(b) = b {
                d.insert(state::state_key(i, "momentum_buffer"), state::copy(b)?);
            }
        }
        Ok(d)
    }

    /// As for every optimizer; the saved `dampening`, `nesterov` and
    /// `maximize` replace the optimizer's (their defaults where the state
    /// has none, as PyTorch's), checked as [`Sgd::with_nesterov`] checks
    /// them.
    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("SGD", dict);
        let (lr, momentum) = (r.hyper("lr")?, r.hyper("momentum")?);
        let weight_decay = r.hyper("weight_decay")?;
        let dampening = r.hyper_or("dampening", 0.0)?;
        let (nesterov, maximize) = (r.flag("nesterov")?, r.flag("maximize")?);
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        check_non_negative("SGD", "weight decay", weight_decay)?;
        check_dampening(dampening)?;
        check_nesterov(nesterov, momentum, dampening)?;
        let buffers = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| r.like(i, "momentum_buffer", p))
            .collect::<Result<Vec<_>>>()?;
        r.finish(self.params.len())?;
        (self.lr, self.momentum, self.weight_decay) = (lr, momentum, weight_decay);
        (self.dampening, self.nesterov, self.maximize) = (dampening, nesterov, maximize);
        self.buffers = buffers;
        Ok(())
    }

    /// The parameters and gradients as every optimizer checks them, and
    /// each `alpha` this step converts to a parameter's dtype (`-lr`, the
    /// weight decay, `1 - dampening` once the parameter has a momentum
    /// buffer, the momentum with Nesterov's): PyTorch refuses one beyond the
    /// dtype's range ("value cannot be converted to type c10::Half without
    /// overflow" for an lr of 1e5 on an f16 parameter) after updating the
    /// parameters before it; strata refuses it before updating any.
    fn check_step(&self) -> Result<()> {
        super::check_step("SGD", &self.params, false)?;
        for (p, buf) in self.params.iter().zip(&self.buffers) {
            if p.grad().is_none() {
                continue;
            }
            let dtype = p.dtype();
            let fits = |alpha: f64| super::check_scalar_fits("SGD", alpha, dtype);
            fits(-self.lr)?;
            if self.weight_decay != 0.0 {
                fits(self.weight_decay)?;
            }
            if self.momentum != 0.0 {
                if buf.is_some() {
                    fits(1.0 - self.dampening)?;
                }
                if self.nesterov {
                    fits(self.momentum)?;
                }
            }
        }
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        self.check_step()?;
        for (p, buf) in self.params.iter().zip(self.buffers.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            // PyTorch: `grad = grads[i] if not maximize else -grads[i]`.
            let reduced = reduced_cpu(&g, p.data());
            let g = match (self.maximize, reduced) {
                (false, _) => g,
                (true, false) => g.neg()?,
                // `-g` is laid out as PyTorch lays it out (see `reduced_cpu`).
                (true, true) => as_unary_result(&g, g.neg()?)?,
            };
            let g = if self.weight_decay == 0.0 {
                g
            } else {
                add_scaled(&g, p.data(), self.weight_decay)?
            };
            let d = if self.momentum != 0.0 {
                let b = match buf {
                    Some(b) => {
                        b.mul_(self.momentum)?;
                        // `buf.add_(grad, alpha=1 - dampening)`.
                        add_scaled_(b, &g, 1.0 - self.dampening)?;
                        b.clone()
                    }
                    None => {
                        let b = if reduced {
                            clone_as_pytorch(&g)?
                        } else {
                            g.clone_contiguous()?
                        };
                        *buf = Some(b.clone());
                        b
                    }
                };
                if self.nesterov {
                    add_scaled(&g, &b, self.momentum)?
                } else {
                    b
                }
            } else {
                g
            };
            add_scaled_(p.data(), &d, -self.lr)?;
        }
        Ok(())
    }
}
