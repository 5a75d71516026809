//! Normalisation, losses and dropout (issue 12), recorded with saved
//! tensors as small as PyTorch's:
//!
//! * `layer_norm` saves the input, the weight (if any) and the per-row mean
//!   and rstd (Acc dtype, one value each per row); its backward is the fused
//!   kernels of strata-tensor.
//! * `cross_entropy` (class targets) saves the per-row logsumexp (as the row
//!   max and the log of the sum of exponentials above it, two values a row, so
//!   that rows of huge logits keep the log-sum), the i64
//!   targets and the 0-d total weight, plus the logits it differentiates
//!   with respect to (PyTorch's `log_softmax` output is logits-sized too);
//!   the backward recomputes softmax − one-hot on the fly.
//! * `dropout` saves nothing but its seed: the keep-mask is regenerated from
//!   the Philox stream in backward, so a dropout layer keeps 8 bytes instead
//!   of a mask of one byte per element (PyTorch stores the bool mask: 25 MB
//!   for a `[8·1024, 3072]` activation).

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{
    channel_dropout_batched, feature_dropout_shape, nll_weights, CrossEntropyArgs, DType,
    Reduction, Tensor,
};

/// Seeds the default generator ([`strata_tensor::generator`]) that
/// [`Var::dropout`] draws its masks from and resets its offset (PyTorch's
/// `torch.manual_seed` for dropout). Checkpointing saves and replays this
/// generator, so a recomputed dropout draws the same mask.
pub fn manual_seed(seed: u64) {
    strata_tensor::generator::manual_seed(seed);
}

/// The default generator's state: `(seed, offset)`; the offset grows by one
/// per dropout call that draws a mask (training, 0 < p < 1, some element).
pub fn generator_state() -> (u64, u64) {
    let s = strata_tensor::generator::rng_state();
    (s.seed, s.offset)
}

/// The next call's Philox seed from the default generator; advances the offset.
fn next_seed() -> u64 {
    strata_tensor::generator::next_seed()
}

impl Var {
    /// `F.layer_norm(self, normalized_shape, weight, bias, eps)`; saves the
    /// input, the weight and the per-row mean and rstd.
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Var>,
        bias: Option<&Var>,
        eps: f64,
    ) -> Result<Var> {
        let mut ins = vec![self];
        ins.extend(weight);
        ins.extend(bias);
        if let Some(c) = crate::autocast::cast_inputs("layer_norm", &ins)? {
            let mut rest = c[1..].iter();
            let w = weight.and_then(|_| rest.next());
            let b = bias.and_then(|_| rest.next());
            return c[0].layer_norm(normalized_shape, w, b, eps);
        }
        let (out, mean, rstd) = self.data().layer_norm_forward(
            normalized_shape,
            weight.map(|w| w.data()),
            bias.map(|b| b.data()),
            eps,
        )?;
        // PyTorch's CPU kernel keeps an f16/bf16 input's mean and rstd in
        // f32 only where a parameter is f32 ("mixed type"); otherwise it
        // stores them rounded to the input's dtype, and its backward reads
        // those. Saved so, strata's backward (PyTorch's arithmetic) gives
        // PyTorch's gradients bit for bit.
        let dt = self.dtype();
        let mixed = [weight, bias]
            .iter()
            .any(|p| p.is_some_and(|p| p.dtype() == DType::F32));
        let (mean, rstd) = if matches!(dt, DType::F16 | DType::BF16)
            && !mixed
            && self.data().device() == strata_tensor::Device::Cpu
        {
            let round = |t: Tensor| t.to_dtype_contiguous(dt)?.to_dtype_contiguous(DType::F32);
            (round(mean)?, round(rstd)?)
        } else {
            (mean, rstd)
        };
        let x = self.data().clone();
        let w = weight.map(|w| w.data().clone());
        let has_w = w.is_some();
        let saved = move || {
            let mut v = vec![x, mean, rstd];
            v.extend(w);
            v
        };
        let shape = normalized_shape.to_vec();
        let f = formula(move |g, s, needs| {
            let w = if has_w { Some(&s[3]) } else { None };
            let [dx, dw, db] = Tensor::layer_norm_backward(
                g,
                &s[0],
                &s[1],
                &s[2],
                w,
                &shape,
                [needs[0], needs[1], needs[2]],
            )?;
            Ok(vec![dx, dw, db])
        });
        record(
            "NativeLayerNormBackward",
            out,
            &[Some(self), weight, bias],
            saved,
            f,
            false,
        )
    }

    /// `F.cross_entropy(self, target, ...)` over class logits with class
    /// targets (i64 or u8) or class probabilities (a float tensor of self's
    /// shape); the gradient flows to the logits.
    pub fn cross_entropy(&self, target: &Tensor, args: CrossEntropyArgs) -> Result<Var> {
        // Autocast casts the class weights and probability targets too (a
        // bf16 weight in a region was refused against the f32 logits).
        let weight = crate::autocast::cast_tensor_arg("cross_entropy", args.weight)?;
        let probs = match target.dtype().is_float() {
            true => crate::autocast::cast_tensor_arg("cross_entropy", Some(target))?,
            false => None,
        };
        if weight.is_some() || probs.is_some() {
            let args = CrossEntropyArgs {
                weight: weight.as_ref().or(args.weight),
                ignore_index: args.ignore_index,
                reduction: args.reduction,
                label_smoothing: args.label_smoothing,
            };
            return self.cross_entropy(probs.as_ref().unwrap_or(target), args);
        }
        if let Some(c) = crate::autocast::cast_inputs("cross_entropy", &[self])? {
            return c[0].cross_entropy(target, args);
        }
        // Probability targets are composed from recorded ops below, which
        // need only the forward's checks; class targets run the fused forward.
        let fused = if target.dtype().is_float() {
            self.data().check_cross_entropy_args(target, &args)?;
            None
        } else {
            Some(self.data().cross_entropy_forward(target, args)?)
        };
        let (ignore_index, reduction, label_smoothing) =
            (args.ignore_index, args.reduction, args.label_smoothing);
        fn rebuild_args(
            w: Option<&Tensor>,
            (ignore_index, reduction, label_smoothing): (i64, Reduction, f64),
        ) -> CrossEntropyArgs<'_> {
            CrossEntropyArgs {
                weight: w,
                ignore_index,
                reduction,
                label_smoothing,
            }
        }
        let rest = (ignore_index, reduction, label_smoothing);
        match fused {
            Some((loss, Some(sv))) => {
                let x = self.data().clone();
                // The class weight is saved (version-checked) with the rest.
                let weight = args.weight.cloned();
                let saved = move || {
                    let mut v = vec![x, sv.lse, sv.target, sv.total_weight];
                    v.extend(weight);
                    v
                };
                let f = formula(move |g, s, _n| {
                    let sv = strata_tensor::CrossEntropySaved {
                        lse: s[1].clone(),
                        target: s[2].clone(),
                        total_weight: s[3].clone(),
                    };
                    let dx = s[0].cross_entropy_backward(g, &sv, rebuild_args(s.get(4), rest))?;
                    Ok(vec![Some(dx)])
                });
                record("NllLossBackward", loss, &[Some(self)], saved, f, false)
            }
            _ => {
                // Probability targets: PyTorch's `cross_entropy_loss_prob_target`
                // op by op, recorded: the log-probabilities in the input's
                // dtype, the smoothed targets in the targets', the products
                // and the loss in the promoted dtype (f32 logits with f64
                // targets give an f64 loss; the logits' gradient is f32).
                // `check_cross_entropy_args` above checked the arguments.
                let cdim = if self.ndim() == 1 { 0 } else { 1 };
                let classes = self.shape()[cdim];
                let lsm = self.log_softmax(cdim as i64, None)?;
                // PyTorch smooths only when ε > 0 (a -0.0 target keeps its sign).
                let p = if label_smoothing > 0.0 {
                    target
                        .mul(1.0 - label_smoothing)?
                        .add(label_smoothing / classes as f64)?
                } else {
                    target.clone()
                };
                let mut t = lsm.mul(&Var::new(p))?;
                if let Some(w) = args.weight {
                    let mut shape = vec![1i64; self.ndim()];
                    shape[cdim] = classes as i64;
                    t = t.mul(&Var::new(w.reshape(&shape)?))?;
                }
                match reduction {
                    Reduction::None => t.sum(Some(&[cdim as i64]), false)?.neg(),
                    Reduction::Sum => t.sum(None, false)?.neg(),
                    // Divided by the number of rows; the mean of no element
                    // is NaN (0 / 0), as PyTorch fills it.
                    Reduction::Mean => {
                        let rows = if self.numel() == 0 {
                            0
                        } else {
                            self.numel() / classes
                        };
                        t.sum(None, false)?.neg()?.div(rows as f64)
                    }
                }
            }
        }
    }

    /// `F.nll_loss(self, target, weight, ignore_index, reduction)`; the
    /// backward scatters `-w[t]` times the upstream gradient into zeros.
    pub fn nll_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: i64,
        reduction: Reduction,
    ) -> Result<Var> {
        // Autocast casts the class weights too (see `cross_entropy`).
        if let Some(w) = crate::autocast::cast_tensor_arg("nll_loss", weight)? {
            return self.nll_loss(target, Some(&w), ignore_index, reduction);
        }
        if let Some(c) = crate::autocast::cast_inputs("nll_loss", &[self])? {
            return c[0].nll_loss(target, weight, ignore_index, reduction);
        }
        // An N-d input's weight of C elements in any shape, as `[C]`.
        let flat = strata_tensor::class_weight(self.data(), weight)?;
        let weight = flat.as_ref();
        let out = self
            .data()
            .nll_loss(target, weight, ignore_index, reduction)?;
        // The weight is saved (version-checked) like the targets: changed in
        // place after the forward, it would silently change the gradient.
        let weight = weight.cloned();
        let t = target.to_dtype_contiguous(DType::I64)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let saved = move || {
            let mut v = vec![t];
            v.extend(weight);
            v
        };
        let f = formula(move |g, s, _n| {
            let classes = if shape.len() == 1 { shape[0] } else { shape[1] };
            if classes == 0 || shape.contains(&0) {
                // Nothing to scatter into (no class, or no row): the
                // gradient is the input's empty shape, as PyTorch's.
                return Ok(vec![Some(Tensor::zeros(&shape, dtype, g.device())?)]);
            }
            let t = s[0].reshape(&[-1])?;
            let acc = strata_tensor::acc_dtype(dtype);
            let (wt, safe) = nll_weights(&t, s.get(1), ignore_index, acc)?;
            let g = g.to_dtype_contiguous(acc)?;
            let coef = match reduction {
                Reduction::None => g.reshape(&[-1])?,
                Reduction::Sum => g.reshape(&[1])?,
                Reduction::Mean => g.div(&wt.sum(None, false)?)?.reshape(&[1])?,
            };
            // Ignored rows get 0, as PyTorch's kernel skips them: with every
            // row ignored the mean's coefficient is g / 0 and `0 * inf`
            // would put NaN into their class-0 entries.
            let vals = Tensor::where_cond(&t.eq(ignore_index)?, 0.0, &wt.mul(&coef)?.neg()?)?
                .unsqueeze(1)?;
            let rows = safe.numel();
            let z = Tensor::zeros(&[rows, classes], acc, g.device())?;
            let dx = z.scatter_add(1, &safe.unsqueeze(1)?, &vals)?;
            Ok(vec![Some(
                from_rows(&dx, &shape)?.to_dtype_contiguous(dtype)?,
            )])
        });
        record("NllLossBackward", out, &[Some(self)], saved, f, false)
    }

    /// `F.mse_loss(self, target, reduction, weight)`; gradients flow to
    /// both operands (summed back over broadcast dims).
    pub fn mse_loss(
        &self,
        target: &Var,
        reduction: Reduction,
        weight: Option<&Tensor>,
    ) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("mse_loss", &[self, target])? {
            return c[0].mse_loss(&c[1], reduction, weight);
        }
        let out = self.data().mse_loss(target.data(), reduction, weight)?;
        let (x, y) = (self.data().clone(), target.data().clone());
        // The weight is saved (version-checked) with the operands.
        let weight = weight.cloned();
        let (xs, xd, ys, yd) = (
            self.shape().to_vec(),
            self.dtype(),
            target.shape().to_vec(),
            target.dtype(),
        );
        let saved = move || {
            let mut v = vec![x, y];
            v.extend(weight);
            v
        };
        let f = formula(move |g, s, needs| {
            let d = s[0].sub(&s[1])?;
            let mut k = d.mul(2.0)?;
            let weight = s.get(2);
            if let Some(w) = weight {
                k = k.mul(w)?;
            }
            let scale = match (reduction, weight) {
                (Reduction::Mean, None) => g.div(d.numel() as f64)?,
                (Reduction::Mean, Some(w)) => g.div(
                    &w.to_dtype_contiguous(k.dtype())?
                        .broadcast_to(d.shape())?
                        .sum(None, false)?,
                )?,
                _ => g.clone(),
            };
            let gx = k.mul(&scale)?;
            Ok(vec![
                if needs[0] {
                    Some(sum_to(&gx, &xs, xd)?)
                } else {
                    None
                },
                if needs[1] {
                    Some(sum_to(&gx.neg()?, &ys, yd)?)
                } else {
                    None
                },
            ])
        });
        record(
            "MseLossBackward",
            out,
            &[Some(self), Some(target)],
            saved,
            f,
            false,
        )
    }

    /// `F.dropout(self, p, train)`: the mask comes from the dropout generator
    /// ([`manual_seed`]), whose offset advances once per call that draws a
    /// mask; only the seed is kept for backward, where the mask is
    /// regenerated.
    ///
    /// As PyTorch's `_dropout`, a call that needs no mask (not training,
    /// `p` = 0 or 1, no element) returns the input or zeros of any dtype
    /// and draws nothing; neither does a call that fails (a `p` outside
    /// [0, 1], an integer input with 0 < `p` < 1): the arguments are
    /// checked before the generator is advanced (PyTorch draws the noise
    /// before refusing an integer input). The identity (not training,
    /// `p` = 0, or no element) is this variable itself, as PyTorch returns
    /// its input: an in-place op on the result is one on this variable,
    /// and a result taken in no_grad mode still requires grad.
    pub fn dropout(&self, p: f64, train: bool) -> Result<Var> {
        self.dropout_of(p, train, Tensor::dropout, |s| Ok(s.to_vec()))
    }

    /// `torch.feature_dropout(self, p, train)` ([`Tensor::feature_dropout`]:
    /// whole channels of an `[N, C, *]` input), with
    /// [`dropout`](Var::dropout)'s generator and backward (the channel mask
    /// regenerated from its seed).
    pub fn feature_dropout(&self, p: f64, train: bool) -> Result<Var> {
        self.dropout_of(p, train, Tensor::feature_dropout, feature_dropout_shape)
    }

    /// `F.dropout1d` ([`Tensor::dropout1d`]'s ranks) through
    /// [`feature_dropout`](Var::feature_dropout).
    pub fn dropout1d(&self, p: f64, train: bool) -> Result<Var> {
        self.channel_dropout(1, p, train)
    }

    /// `F.dropout2d`: [`feature_dropout`](Var::feature_dropout).
    pub fn dropout2d(&self, p: f64, train: bool) -> Result<Var> {
        self.channel_dropout(2, p, train)
    }

    /// `F.dropout3d` ([`Tensor::dropout3d`]'s ranks) through
    /// [`feature_dropout`](Var::feature_dropout).
    pub fn dropout3d(&self, p: f64, train: bool) -> Result<Var> {
        self.channel_dropout(3, p, train)
    }

    /// `F.dropout{spatial}d`, batched or not by
    /// [`channel_dropout_batched`](strata_tensor::channel_dropout_batched).
    fn channel_dropout(&self, spatial: usize, p: f64, train: bool) -> Result<Var> {
        if channel_dropout_batched(spatial, self.ndim())? {
            return self.feature_dropout(p, train);
        }
        self.unsqueeze(0)?
            .feature_dropout(p, train)?
            .squeeze_dims(&[0])
    }

    /// A dropout whose noise has `noise_shape(self.shape())` (broadcast over
    /// self): `tensor_op` computes the forward from the seed drawn here.
    fn dropout_of(
        &self,
        p: f64,
        train: bool,
        tensor_op: fn(&Tensor, f64, bool, u64) -> strata_tensor::Result<Tensor>,
        noise_shape: fn(&[usize]) -> strata_tensor::Result<Vec<usize>>,
    ) -> Result<Var> {
        let draws = train && p > 0.0 && p < 1.0 && self.numel() > 0;
        if !draws || !self.dtype().is_float() {
            // Identity, zeros (p = 1), or the tensor op's typed error for a
            // bad p or an integer input that would need scaling.
            let out = tensor_op(self.data(), p, train, 0)?;
            if !train || p == 0.0 || self.numel() == 0 {
                return Ok(self.clone());
            }
            // p = 1 (an integer input with 0 < p < 1 was refused above).
            // PyTorch multiplies by zeros: a NaN gradient times 0 stays NaN.
            let f = formula(move |g, _s, _n| Ok(vec![Some(g.mul(0.0)?)]));
            return saving(record(
                "DropoutBackward",
                out,
                &[Some(self)],
                Vec::new,
                f,
                false,
            )?);
        }
        // Checked before the generator advances.
        let shape = noise_shape(self.shape())?;
        let seed = next_seed();
        let out = tensor_op(self.data(), p, true, seed)?;
        let f = formula(move |g, _s, _n| {
            // PyTorch's `grad * noise`: a NaN gradient stays NaN where the
            // element was dropped.
            let noise = Tensor::dropout_noise(&shape, p, seed, g.dtype(), g.device())?;
            Ok(vec![Some(g.mul(&noise)?)])
        });
        saving(record(
            "DropoutBackward",
            out,
            &[Some(self)],
            Vec::new,
            f,
            false,
        )?)
    }
}

/// Marks `out`'s node as saving a tensor although it keeps none: PyTorch's
/// dropout in training (p > 0) is `input * mask` (`MulBackward0`, which
/// saves the mask, or the zeros for p = 1), so a second backward through
/// it after its graph was released is refused; strata keeps only the
/// mask's seed.
fn saving(out: Var) -> Result<Var> {
    if let Some(node) = out.grad_fn() {
        node.mark_saves();
    }
    Ok(out)
}

/// `[rows, C]` back to a class-dim-1 shape (the inverse of moving the class
/// dim last and flattening the rest).
pub(crate) fn from_rows(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if shape.len() == 1 {
        return Ok(t.reshape(&[shape[0] as i64])?);
    }
    let n = shape.len();
    let mut moved: Vec<i64> = vec![shape[0] as i64];
    moved.extend(shape[2..].iter().map(|&s| s as i64));
    moved.push(shape[1] as i64);
    let mut perm: Vec<i64> = vec![0, n as i64 - 1];
    perm.extend(1..n as i64 - 1);
    Ok(t.reshape(&moved)?.permute(&perm)?)
}
