//! Session 79: `torch.linalg` on variables ([`strata_tensor::linalg`]'s
//! ops, recorded), with PyTorch 2.15's gradients (`derivatives.yaml` and
//! `FunctionsManual.cpp`, real dtypes): `det` (0 for an exactly singular
//! matrix, as PyTorch's first-order backward), `slogdet`, `logdet`, `inv`, `solve`, `cholesky`, `qr`
//! (reduced; complete for `m <= n`), `eigh`/`eigvalsh`, `svd`/`svdvals`,
//! `pinv`, `lstsq`'s solution; `matrix_power`, `cond`, the norms, `vecdot`
//! and `cross` are compositions of recorded ops, as in PyTorch.
//!
//! strata's tape has one output per node, so a factorization with several
//! differentiable outputs (`eigh`, `svd`, `qr`) is recorded as one node
//! whose output is its factors flattened end to end, and each factor is a
//! view of it. The backward receives one gradient for all; the part of a
//! factor the loss does not reach is zero, and a factor whose gradient is
//! zero everywhere is taken as PyTorch's undefined gradient (so that, as in
//! PyTorch, a loss of the eigenvalues alone does not divide by the gaps
//! between them).
//!
//! ```
//! # use strata_tensor::DType;
//! use strata_autograd::{linalg, Var};
//! use strata_tensor::tensor;
//! let a = Var::parameter(tensor![[2.0f64, 1.0], [1.0, 3.0]]?.to_dtype(DType::F64)?)?;
//! linalg::det(&a)?.backward()?;
//! // d det / dA = det A⁻ᵀ = [[3, -1], [-1, 2]].
//! assert!(a.grad().unwrap().allclose(&tensor![[3.0f64, -1.0], [-1.0, 2.0]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
//! # Ok::<(), strata_autograd::AutogradError>(())
//! ```

mod formulas;

use super::{formula, sum_to};
use crate::error::{AutogradError, Result};
use crate::var::{record, Var};
use formulas::{mt, shape_i64};
use strata_tensor::linalg as tl;
pub use strata_tensor::linalg::{NormOrd, QrMode, Uplo};
use strata_tensor::{Tensor, TensorError};

/// Records `outputs` as one node (their flattened concatenation) and
/// returns each as a view of it. `backward(grads, saved, needs)` receives
/// each output's gradient, `None` where it is zero everywhere.
fn record_packed<F>(
    name: &'static str,
    input: &Var,
    outputs: Vec<Tensor>,
    saved: Vec<Tensor>,
    backward: F,
) -> Result<Vec<Var>>
where
    F: Fn(&[Option<Tensor>], &[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
{
    let shapes: Vec<Vec<usize>> = outputs.iter().map(|t| t.shape().to_vec()).collect();
    let flat: Vec<Tensor> = outputs
        .iter()
        .map(|t| t.reshape(&[-1]))
        .collect::<std::result::Result<_, _>>()?;
    let refs: Vec<&Tensor> = flat.iter().collect();
    let packed = Tensor::cat(&refs, 0)?;
    let lens: Vec<usize> = outputs.iter().map(|t| t.numel()).collect();
    let (l2, s2) = (lens.clone(), shapes.clone());
    let f = formula(move |g, s, _needs| {
        let mut pieces = Vec::with_capacity(l2.len());
        let mut off = 0i64;
        for (len, shape) in l2.iter().zip(&s2) {
            let piece = g.narrow(0, off, *len as i64)?.reshape(&shape_i64(shape))?;
            off += *len as i64;
            let zero = piece.to_vec_as::<f64>()?.iter().all(|&v| v == 0.0);
            pieces.push((!zero).then_some(piece));
        }
        if pieces.iter().all(Option::is_none) {
            return Ok(vec![None]);
        }
        Ok(vec![Some(backward(&pieces, s)?)])
    });
    let out = record(name, packed, &[Some(input)], move || saved, f, false)?;
    let mut vars = Vec::with_capacity(lens.len());
    let mut off = 0i64;
    for (len, shape) in lens.iter().zip(&shapes) {
        vars.push(
            out.narrow(0, off, *len as i64)?
                .reshape(&shape_i64(shape))?,
        );
        off += *len as i64;
    }
    Ok(vars)
}

/// `value` (the op's answer for an empty `a`) on the graph of `a` with a
/// zero gradient, as PyTorch's empty reductions leave it: `0 * sum(a) +
/// value` (the sum of no elements is 0).
fn on_graph(a: &Var, value: Tensor) -> Result<Var> {
    a.sum(None, false)?.mul(0.0)?.add(&Var::new(value))
}

/// `torch.linalg.det(A)` ([`strata_tensor::linalg::det`]), recorded: the
/// gradient is `g det A⁻ᵀ` (a solve with `Aᵀ`), and 0 for an exactly
/// singular matrix, as PyTorch 2.15's first-order backward gives it (its
/// SVD form, the cofactors, only runs under `create_graph`).
///
/// Errors: those of [`strata_tensor::linalg::det`].
pub fn det(a: &Var) -> Result<Var> {
    let out = tl::det(a.data())?;
    let (x, d) = (a.data().clone(), out.clone());
    let f = formula(|g, s, _| Ok(vec![Some(formulas::det_backward(g, &s[1], &s[0])?)]));
    record(
        "LinalgDetBackward0",
        out,
        &[Some(a)],
        move || vec![x, d],
        f,
        false,
    )
}

/// `torch.linalg.slogdet(A)`: `(sign, logabsdet)`, the log recorded
/// (gradient `g A⁻ᵀ`, a solve with `Aᵀ`), the sign a constant.
///
/// Errors: those of [`strata_tensor::linalg::slogdet`]; in backward, a
/// singular `A` ([`TensorError::Singular`], where PyTorch's gradient is
/// infinite or NaN).
pub fn slogdet(a: &Var) -> Result<(Var, Var)> {
    let (sign, logabs) = tl::slogdet(a.data())?;
    let x = a.data().clone();
    let f = formula(|g, s, _| Ok(vec![Some(formulas::slogdet_backward(g, &s[0])?)]));
    let l = record(
        "LinalgSlogdetBackward0",
        logabs,
        &[Some(a)],
        move || vec![x],
        f,
        false,
    )?;
    Ok((Var::new(sign), l))
}

/// `torch.logdet(A)`: [`strata_tensor::linalg::logdet`], recorded as
/// PyTorch's `where(sign == -1, nan, logabsdet)`: no gradient where the
/// determinant is negative.
///
/// Errors: those of [`slogdet`].
pub fn logdet(a: &Var) -> Result<Var> {
    let (sign, _) = tl::slogdet(a.data())?;
    let out = tl::logdet(a.data())?;
    let x = a.data().clone();
    let f = formula(|g, s, _| {
        let g = Tensor::where_cond(&s[1].lt(0.0)?, 0.0, g)?;
        Ok(vec![Some(formulas::slogdet_backward(&g, &s[0])?)])
    });
    record(
        "LogdetBackward0",
        out,
        &[Some(a)],
        move || vec![x, sign],
        f,
        false,
    )
}

/// `torch.linalg.inv(A)`, recorded: the gradient is `-A⁻ᵀ g A⁻ᵀ`.
///
/// Errors: those of [`strata_tensor::linalg::inv`].
///
/// ```
/// # use strata_tensor::DType;
/// use strata_autograd::{linalg, Var};
/// use strata_tensor::tensor;
/// let a = Var::parameter(tensor![[2.0f64, 0.0], [0.0, 4.0]]?.to_dtype(DType::F64)?)?;
/// linalg::inv(&a)?.sum(None, false)?.backward()?;
/// // -A⁻ᵀ 1 A⁻ᵀ for a diagonal A: -1/(a_i a_j).
/// assert!(a.grad().unwrap().allclose(&tensor![[-0.25f64, -0.125], [-0.125, -0.0625]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
pub fn inv(a: &Var) -> Result<Var> {
    let out = tl::inv(a.data())?;
    let r = out.clone();
    let f = formula(|g, s, _| Ok(vec![Some(formulas::inv_backward(g, &s[0])?)]));
    record(
        "LinalgInvExBackward0",
        out,
        &[Some(a)],
        move || vec![r],
        f,
        false,
    )
}

/// `torch.linalg.solve(A, B)`, recorded in both operands: `gB =
/// solve(Aᵀ, g)`, `gA = -gB Xᵀ`, each summed back over broadcast batch dims.
///
/// Errors: those of [`strata_tensor::linalg::solve`].
pub fn solve(a: &Var, b: &Var) -> Result<Var> {
    let out = tl::solve(a.data(), b.data())?;
    let vector = tl::solve_is_vector_rhs(a.shape(), b.shape());
    let (x, aa) = (out.clone(), a.data().clone());
    let (a_shape, b_shape, dt) = (a.shape().to_vec(), b.shape().to_vec(), a.dtype());
    let f = formula(move |g, s, needs| {
        let (ga, gb) = formulas::solve_backward(g, &s[0], &s[1], vector)?;
        Ok(vec![
            needs[0].then(|| sum_to(&ga, &a_shape, dt)).transpose()?,
            needs[1].then(|| sum_to(&gb, &b_shape, dt)).transpose()?,
        ])
    });
    record(
        "LinalgSolveExBackward0",
        out,
        &[Some(a), Some(b)],
        move || vec![x, aa],
        f,
        false,
    )
}

/// `torch.linalg.cholesky(A, upper)`, recorded with PyTorch's
/// `cholesky_backward` (`L⁻ᴴ Φ(Lᴴ gL) L⁻¹`, `Φ` taking the lower triangle
/// with its diagonal halved and symmetrizing it).
///
/// Errors: those of [`strata_tensor::linalg::cholesky`].
pub fn cholesky(a: &Var, upper: bool) -> Result<Var> {
    let out = tl::cholesky(a.data(), upper)?;
    let l = out.clone();
    let f = formula(move |g, s, _| Ok(vec![Some(formulas::cholesky_backward(g, upper, &s[0])?)]));
    record(
        "LinalgCholeskyExBackward0",
        out,
        &[Some(a)],
        move || vec![l],
        f,
        false,
    )
}

fn qr_not_differentiable(msg: &str) -> AutogradError {
    TensorError::Value {
        op: "linalg.qr",
        msg: msg.to_string(),
    }
    .into()
}

/// `torch.linalg.qr(A, mode)` (`(Q, R)`), both factors recorded with
/// PyTorch's `linalg_qr_backward`. As in PyTorch, `mode = R` (no `Q`) and
/// `Complete` for a tall matrix are not differentiable: their backward is
/// an error.
///
/// Errors: those of [`strata_tensor::linalg::qr`]; in backward, the modes
/// above ([`TensorError::Value`] with PyTorch's words).
pub fn qr(a: &Var, mode: QrMode) -> Result<(Var, Var)> {
    let (q, r) = tl::qr(a.data(), mode)?;
    let (m, n) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
    let bad = match mode {
        QrMode::R => Some(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. \
             Please use linalg.qr(A, mode='reduced') if you are going to differentiate through \
             linalg.qr.",
        ),
        QrMode::Complete if m > n => Some(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.",
        ),
        _ => None,
    };
    if mode == QrMode::R {
        let f = formula(move |_, _, _| Err(qr_not_differentiable(bad.unwrap_or_default())));
        let rv = record("LinalgQrBackward0", r, &[Some(a)], Vec::new, f, false)?;
        return Ok((Var::new(q), rv));
    }
    let saved = vec![q.clone(), r.clone()];
    let v = record_packed("LinalgQrBackward0", a, vec![q, r], saved, move |g, s| {
        if let Some(msg) = bad {
            return Err(qr_not_differentiable(msg));
        }
        formulas::qr_backward(g[0].as_ref(), g[1].as_ref(), &s[0], &s[1])
    })?;
    let mut it = v.into_iter();
    Ok((it.next().unwrap(), it.next().unwrap()))
}

/// `torch.linalg.eigh(A, UPLO)` (`(eigenvalues, eigenvectors)`), both
/// recorded with PyTorch's `linalg_eig_backward` for Hermitian input:
/// `V (skew(VᵀgV) / E + diag(gL)) Vᵀ`, `E_ij = L_j - L_i`. As in PyTorch a
/// loss of the eigenvectors of a matrix with repeated eigenvalues gives
/// infinite or NaN gradients, and only gauge-invariant losses (not
/// depending on each eigenvector's sign) have meaningful ones.
///
/// Errors: those of [`strata_tensor::linalg::eigh`].
pub fn eigh(a: &Var, uplo: Uplo) -> Result<(Var, Var)> {
    let (l, v) = tl::eigh(a.data(), uplo)?;
    let saved = vec![l.clone(), v.clone()];
    let out = record_packed("LinalgEighBackward0", a, vec![l, v], saved, |g, s| {
        formulas::eigh_backward(g[0].as_ref(), g[1].as_ref(), &s[0], &s[1])
    })?;
    let mut it = out.into_iter();
    Ok((it.next().unwrap(), it.next().unwrap()))
}

/// `torch.linalg.eigvalsh(A, UPLO)`, recorded: `V diag(g) Vᵀ` (the
/// eigenvectors computed in the forward and kept for it).
///
/// Errors: those of [`strata_tensor::linalg::eigvalsh`].
pub fn eigvalsh(a: &Var, uplo: Uplo) -> Result<Var> {
    let (l, v) = tl::eigh(a.data(), uplo)?;
    let saved = (l.clone(), v);
    let f = formula(|g, s, _| {
        Ok(vec![Some(formulas::eigh_backward(
            Some(g),
            None,
            &s[0],
            &s[1],
        )?)])
    });
    record(
        "LinalgEighBackward0",
        l,
        &[Some(a)],
        move || vec![saved.0, saved.1],
        f,
        false,
    )
}

/// `torch.linalg.svd(A, full_matrices)` (`(U, S, Vh)`), recorded with
/// PyTorch's `svd_backward` (the extra columns of a full `U` and rows of
/// `Vh` dropped first, as PyTorch drops them). Only gauge-invariant losses
/// (not depending on the signs of a singular pair) have meaningful
/// gradients; repeated singular values give infinite or NaN ones, as in
/// PyTorch.
///
/// Errors: those of [`strata_tensor::linalg::svd`].
///
/// ```
/// # use strata_tensor::DType;
/// use strata_autograd::{linalg, Var};
/// use strata_tensor::tensor;
/// let a = Var::parameter(tensor![[3.0f64, 0.0], [0.0, 1.0]]?.to_dtype(DType::F64)?)?;
/// let (_u, s, _vh) = linalg::svd(&a, false)?;
/// s.sum(None, false)?.backward()?;
/// // d(σ1 + σ2)/dA = U Vh = I here.
/// assert!(a.grad().unwrap().allclose(&tensor![[1.0f64, 0.0], [0.0, 1.0]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
pub fn svd(a: &Var, full_matrices: bool) -> Result<(Var, Var, Var)> {
    let (u, s, vh) = tl::svd(a.data(), full_matrices)?;
    let k = *s.shape().last().unwrap() as i64;
    let saved = vec![u.clone(), s.clone(), vh.clone()];
    let out = record_packed(
        "LinalgSvdBackward0",
        a,
        vec![u, s, vh],
        saved,
        move |g, sv| {
            let cut_u = |t: &Tensor| t.narrow(-1, 0, k);
            let cut_v = |t: &Tensor| t.narrow(-2, 0, k);
            let (u, vh) = (cut_u(&sv[0])?, cut_v(&sv[2])?);
            let gu = g[0].as_ref().map(cut_u).transpose()?;
            let gvh = g[2].as_ref().map(cut_v).transpose()?;
            formulas::svd_backward(gu.as_ref(), g[1].as_ref(), gvh.as_ref(), &u, &sv[1], &vh)
        },
    )?;
    let mut it = out.into_iter();
    Ok((it.next().unwrap(), it.next().unwrap(), it.next().unwrap()))
}

/// `torch.linalg.svdvals(A)`, recorded: `U diag(g) Vh` (the singular
/// vectors computed in the forward and kept for it).
///
/// Errors: those of [`strata_tensor::linalg::svdvals`].
pub fn svdvals(a: &Var) -> Result<Var> {
    let (u, s, vh) = tl::svd(a.data(), false)?;
    let saved = vec![u, s.clone(), vh];
    let f = formula(|g, sv, _| {
        Ok(vec![Some(formulas::svd_backward(
            None,
            Some(g),
            None,
            &sv[0],
            &sv[1],
            &sv[2],
        )?)])
    });
    record("LinalgSvdBackward0", s, &[Some(a)], move || saved, f, false)
}

/// `torch.linalg.pinv(A, atol, rtol, hermitian)`, recorded with PyTorch's
/// `pinv_backward` (from the pseudo-inverse itself).
///
/// Errors: those of [`strata_tensor::linalg::pinv`].
pub fn pinv(a: &Var, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Var> {
    let out = tl::pinv(a.data(), atol, rtol, hermitian)?;
    let (p, x) = (out.clone(), a.data().clone());
    let f = formula(|g, s, _| Ok(vec![Some(formulas::pinv_backward(g, &s[0], &s[1])?)]));
    record(
        "LinalgPinvBackward0",
        out,
        &[Some(a)],
        move || vec![p, x],
        f,
        false,
    )
}

/// `torch.linalg.lstsq(A, B, rcond).solution`, recorded in both operands
/// as PyTorch's `linalg_lstsq_backward` (through `pinv(A)`: `gA =
/// pinv_backward(gX Bᵀ)`, `gB = pinv(A)ᵀ gX`). The other results of
/// [`strata_tensor::linalg::lstsq`] (empty residuals and singular values,
/// the rank) are not differentiable.
///
/// Errors: those of [`strata_tensor::linalg::lstsq`].
pub fn lstsq(a: &Var, b: &Var, rcond: Option<f64>) -> Result<Var> {
    let out = tl::lstsq(a.data(), b.data(), rcond)?.solution;
    // lstsq's rule (not solve's): a vector has one dim fewer than A.
    let vector = b.ndim() + 1 == a.ndim();
    let (aa, bb) = (a.data().clone(), b.data().clone());
    let (a_shape, b_shape, dt) = (a.shape().to_vec(), b.shape().to_vec(), a.dtype());
    let f = formula(move |g, s, needs| {
        let (a, b) = (&s[0], &s[1]);
        let (g2, b2) = if vector {
            (g.unsqueeze(-1)?, b.unsqueeze(-1)?)
        } else {
            (g.clone(), b.clone())
        };
        // A broadcast to the batch of the gradient.
        let nd = g2.ndim();
        let mut ashape: Vec<i64> = shape_i64(&g2.shape()[..nd - 2]);
        ashape.extend(shape_i64(&a.shape()[a.ndim() - 2..]));
        let ab = a.expand(&ashape)?;
        let p = tl::pinv(&ab, None, None, false)?;
        let ga = if needs[0] {
            let gab = formulas::pinv_backward(&g2.matmul(&mt(&b2)?)?, &p, &ab)?;
            Some(sum_to(&gab, &a_shape, dt)?)
        } else {
            None
        };
        let gb = if needs[1] {
            let gbb = mt(&p)?.matmul(&g2)?;
            let gbb = if vector {
                gbb.squeeze_dims(&[-1])?
            } else {
                gbb
            };
            Some(sum_to(&gbb, &b_shape, dt)?)
        } else {
            None
        };
        Ok(vec![ga, gb])
    });
    record(
        "LinalgLstsqBackward0",
        out,
        &[Some(a), Some(b)],
        move || vec![aa, bb],
        f,
        false,
    )
}

/// `torch.linalg.matrix_power(A, k)`: [`strata_tensor::linalg::matrix_power`]
/// composed of recorded `matmul`s (and [`inv`] for a negative `k`) in
/// PyTorch's order, so its gradient is theirs. `k = 0` gives identities
/// that do not depend on `A`.
///
/// Errors: those of [`strata_tensor::linalg::matrix_power`].
pub fn matrix_power(a: &Var, k: i64) -> Result<Var> {
    if k == 0 {
        // The identity, on the graph with a zero gradient (PyTorch copies
        // it into a clone of A): `where(false, A, I)`.
        let eye = tl::matrix_power(a.data(), 0)?;
        let never = Tensor::zeros(a.shape(), strata_tensor::DType::Bool, a.data().device())?;
        return Var::where_cond(&never, a, &Var::new(eye));
    }
    tl::matrix_power(&a.data().narrow(-1, 0, 0)?.narrow(-2, 0, 0)?, 0)?; // the shape checks
    let base = if k < 0 { inv(a)? } else { a.clone() };
    let mut e = k.unsigned_abs();
    match e {
        1 => return base.mul(1.0),
        2 => return base.matmul(&base),
        3 => return base.matmul(&base)?.matmul(&base),
        _ => {}
    }
    let (mut z, mut result): (Option<Var>, Option<Var>) = (None, None);
    while e > 0 {
        let bit = e % 2;
        e /= 2;
        let zz = match &z {
            Some(z) => z.matmul(z)?,
            None => base.clone(),
        };
        if bit == 1 {
            result = Some(match &result {
                Some(r) => r.matmul(&zz)?,
                None => zz.clone(),
            });
        }
        z = Some(zz);
    }
    Ok(result.expect("k != 0 has a set bit"))
}

/// `torch.linalg.matrix_norm(A, ord, dim, keepdim)` composed of recorded
/// ops as PyTorch composes it: `Fro` a vector 2-norm, `Nuc` the sum of
/// [`svdvals`], ±2 their `amax`/`amin`, ±1 and ±inf `abs`, `sum` and
/// `amax`/`amin`.
///
/// Errors: those of [`strata_tensor::linalg::matrix_norm`].
pub fn matrix_norm(a: &Var, ord: NormOrd, dims: [i64; 2], keepdim: bool) -> Result<Var> {
    // The checks, the empty cases and the value.
    let value = tl::matrix_norm(a.data(), ord, dims, keepdim)?;
    let nd = a.ndim() as i64;
    let norm_dim = |d: i64| if d < 0 { d + nd } else { d };
    let (d0, d1) = (norm_dim(dims[0]), norm_dim(dims[1]));
    if a.numel() == 0 {
        // PyTorch's empty Frobenius, nuclear and ±2 norms stay on the graph
        // (zero gradient); its ±1 and ±inf norms of an empty matrix are
        // constants (a backward through them fails).
        return match ord {
            NormOrd::P(p) if p.abs() == 1.0 || p.is_infinite() => Ok(Var::new(value)),
            _ => on_graph(a, value),
        };
    }
    let mut both = [d0, d1];
    both.sort();
    match ord {
        NormOrd::Fro => a.norm(2.0, Some(&[d0, d1]), keepdim),
        NormOrd::P(p) if p.abs() == 1.0 || p.is_infinite() => {
            let (sum_dim, ext_dim) = if p.abs() == 1.0 { (d0, d1) } else { (d1, d0) };
            let sums = a.abs()?.sum(Some(&[sum_dim]), true)?;
            let ext = if p > 0.0 {
                sums.amax(Some(&[ext_dim]), true)?
            } else {
                sums.amin(Some(&[ext_dim]), true)?
            };
            if keepdim {
                Ok(ext)
            } else {
                ext.squeeze_dims(&both)
            }
        }
        _ => {
            let moved = a.movedim(&[d0, d1], &[-2, -1])?;
            let s = svdvals(&moved)?;
            let mut r = match ord {
                NormOrd::Nuc => s.sum(Some(&[-1]), false)?,
                NormOrd::P(p) if p > 0.0 => s.amax(Some(&[-1]), false)?,
                _ => s.amin(Some(&[-1]), false)?,
            };
            if keepdim {
                for d in both {
                    r = r.unsqueeze(d)?;
                }
            }
            Ok(r)
        }
    }
}

/// `torch.linalg.norm(A, ord, dim, keepdim)`: [`Var::norm`] or
/// [`matrix_norm`] as [`strata_tensor::linalg::norm`] chooses.
///
/// Errors: those of [`strata_tensor::linalg::norm`].
pub fn norm(a: &Var, ord: Option<NormOrd>, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
    tl::norm(a.data(), ord, dims, keepdim)?; // the checks
    let p = |o: Option<NormOrd>| match o {
        Some(NormOrd::P(p)) => p,
        _ => 2.0,
    };
    match dims {
        Some(d) if d.len() == 2 => {
            matrix_norm(a, ord.unwrap_or(NormOrd::Fro), [d[0], d[1]], keepdim)
        }
        Some(d) => a.norm(p(ord), Some(d), keepdim),
        None => match ord {
            Some(o) if a.ndim() == 2 => matrix_norm(a, o, [0, 1], keepdim),
            _ => a.norm(p(ord), None, keepdim),
        },
    }
}

/// `torch.linalg.cond(A, p)`: for `p` 2 (the default) or -2 the ratio of
/// the extreme [`svdvals`] (recorded); for the other norms `‖A‖ ‖A⁻¹‖`
/// through [`matrix_norm`] and [`inv`], or, where a matrix is singular,
/// [`strata_tensor::linalg::cond`]'s infinite value as a constant.
///
/// Errors: those of [`strata_tensor::linalg::cond`].
pub fn cond(a: &Var, p: Option<NormOrd>) -> Result<Var> {
    let value = tl::cond(a.data(), p)?;
    if a.numel() == 0 {
        return on_graph(a, value);
    }
    match p.unwrap_or(NormOrd::P(2.0)) {
        NormOrd::P(v) if v.abs() == 2.0 => {
            let s = svdvals(a)?;
            let k = *s.shape().last().unwrap() as i64;
            let (hi, lo) = (s.select(-1, 0)?, s.select(-1, k - 1)?);
            if v > 0.0 {
                hi.div(&lo)
            } else {
                lo.div(&hi)
            }
        }
        o => match inv(a) {
            Ok(i) => matrix_norm(a, o, [-2, -1], false)?.mul(&matrix_norm(&i, o, [-2, -1], false)?),
            Err(AutogradError::Tensor(TensorError::Singular { .. })) => Ok(Var::new(value)),
            Err(e) => Err(e),
        },
    }
}

/// `torch.linalg.vecdot(x, y, dim)`: `sum(x * y, dim)`, recorded.
///
/// Errors: those of [`strata_tensor::linalg::vecdot`].
pub fn vecdot(x: &Var, y: &Var, dim: i64) -> Result<Var> {
    tl::vecdot(x.data(), y.data(), dim)?; // the checks
    x.mul(y)?.sum(Some(&[dim]), false)
}

/// `torch.linalg.cross(x, y, dim)`: [`Var::cross`] of the broadcast
/// operands.
///
/// Errors: those of [`strata_tensor::linalg::cross`].
pub fn cross(x: &Var, y: &Var, dim: i64) -> Result<Var> {
    let value = tl::cross(x.data(), y.data(), dim)?;
    let s = shape_i64(value.shape());
    x.expand(&s)?.cross(&y.expand(&s)?, dim)
}
