//! The backward formulas of `torch.linalg` as PyTorch 2.15's
//! `FunctionsManual.cpp` writes them (real dtypes), on tensors, so they run
//! on any device. `None` stands for PyTorch's undefined gradient: an output
//! nobody used (a gradient that is exactly zero everywhere is taken for
//! one, which is what it is for every packed output the loss does not
//! reach; see `mod.rs`).

use crate::error::Result;
use strata_tensor::linalg;
use strata_tensor::Tensor;

pub(super) fn mt(x: &Tensor) -> Result<Tensor> {
    Ok(x.transpose(-2, -1)?)
}

fn mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(a.matmul(b)?)
}

/// `[.., n]` → `[.., n, n]` with `x` on the diagonal.
fn diag(x: &Tensor) -> Result<Tensor> {
    Ok(x.diag_embed(0, -2, -1)?)
}

/// The solution `X` of `X M = G` (a right solve): `(Mᵀ)⁻¹ Gᵀ`, transposed.
fn right_solve(g: &Tensor, m: &Tensor) -> Result<Tensor> {
    mt(&linalg::solve(&mt(m)?, &mt(g)?)?)
}

/// `linalg_inv` (derivatives.yaml: `-A⁻ᴴ g A⁻ᴴ` from the result).
pub(super) fn inv_backward(g: &Tensor, inverse: &Tensor) -> Result<Tensor> {
    let ih = mt(inverse)?;
    Ok(mm(&ih, &mm(g, &ih)?)?.neg()?)
}

/// `linalg_det_backward` as PyTorch 2.15 computes a first-order backward:
/// `solve(Aᴴ, g det I)` (an LU solve with the forward's factors). Where the
/// matrix is exactly singular (`det = 0`, a zero pivot) that right-hand
/// side is zero and BLAS's triangular solves leave a zero right-hand side
/// zero, so the gradient is 0: PyTorch's SVD form, which gives the
/// cofactors of a singular matrix, runs only when the backward itself is
/// recorded (`create_graph`), which strata's linalg formulas are not.
/// Nearly singular matrices get `g det A⁻ᵀ` as any other.
pub(super) fn det_backward(g: &Tensor, det: &Tensor, a: &Tensor) -> Result<Tensor> {
    if a.numel() == 0 {
        return Ok(a.zeros_like(None)?);
    }
    let n = a.shape()[a.ndim() - 1];
    if n == 1 {
        // det of a 1 x 1 matrix is its element: the gradient is g, singular
        // or not (PyTorch's too).
        return Ok(g.unsqueeze(-1)?.unsqueeze(-1)?);
    }
    let singular: Vec<bool> = det.to_vec_as::<f64>()?.iter().map(|&d| d == 0.0).collect();
    let eye = Tensor::eye(n, None, a.dtype(), a.device())?;
    let d = g.mul(det)?.unsqueeze(-1)?.unsqueeze(-1)?.mul(&eye)?;
    if !singular.iter().any(|&s| s) {
        return Ok(linalg::solve(&mt(a)?, &d)?);
    }
    let batch: Vec<usize> = a.shape()[..a.ndim() - 2].to_vec();
    let mask = Tensor::from_vec(singular, &batch, a.device())?
        .unsqueeze(-1)?
        .unsqueeze(-1)?;
    // The singular matrices' right-hand sides are zero: solve with the
    // identity in their place and keep zeros.
    let stand_in = Tensor::where_cond(&mask, &eye, a)?;
    let x = linalg::solve(&mt(&stand_in)?, &d)?;
    Ok(Tensor::where_cond(&mask, 0.0, &x)?)
}

pub(super) fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// `slogdet_backward` (real): `solve(Aᴴ, g I)`.
pub(super) fn slogdet_backward(g: &Tensor, a: &Tensor) -> Result<Tensor> {
    let n = a.shape()[a.ndim() - 1];
    let eye = Tensor::eye(n, None, a.dtype(), a.device())?;
    let d = g.unsqueeze(-1)?.unsqueeze(-1)?.mul(&eye)?;
    Ok(linalg::solve(&mt(a)?, &d)?)
}

/// `linalg_solve_backward` (left): `gB = solve(Aᴴ, gX)`, `gA = -gB Xᴴ`
/// (as matrices; a vector right-hand side is a column).
pub(super) fn solve_backward(
    g: &Tensor,
    x: &Tensor,
    a: &Tensor,
    vector: bool,
) -> Result<(Tensor, Tensor)> {
    let (g2, x2) = if vector {
        (g.unsqueeze(-1)?, x.unsqueeze(-1)?)
    } else {
        (g.clone(), x.clone())
    };
    let gb = linalg::solve(&mt(a)?, &g2)?;
    let ga = mm(&gb, &mt(&x2)?)?.neg()?;
    let gb = if vector { gb.squeeze_dims(&[-1])? } else { gb };
    Ok((ga, gb))
}

/// `cholesky_backward`.
pub(super) fn cholesky_backward(gl: &Tensor, upper: bool, l: &Tensor) -> Result<Tensor> {
    let (l, gl) = if upper {
        (mt(l)?, mt(gl)?)
    } else {
        (l.clone(), gl.clone())
    };
    let ga = mm(&mt(&l)?, &gl)?.tril(0)?;
    let ga = ga.add(&mt(&ga.tril(-1)?)?)?.mul(0.5)?;
    // L⁻ᴴ gA L⁻¹: a left solve with Lᴴ, then a right solve with L.
    let ga = linalg::solve(&mt(&l)?, &ga)?;
    right_solve(&ga, &l)
}

/// `linalg_qr_backward` (modes `reduced`, and `complete` for m <= n).
pub(super) fn qr_backward(
    gq: Option<&Tensor>,
    gr: Option<&Tensor>,
    q: &Tensor,
    r: &Tensor,
) -> Result<Tensor> {
    let m = q.shape()[q.ndim() - 2];
    let n = r.shape()[r.ndim() - 1];
    let mut ga = match (gq, gr) {
        (Some(gq), Some(gr)) => mm(gr, &mt(r)?)?.sub(&mm(&mt(q)?, gq)?)?,
        (Some(gq), None) => mm(&mt(q)?, gq)?.neg()?,
        (None, Some(gr)) => mm(gr, &mt(r)?)?,
        (None, None) => unreachable!("the caller checks"),
    };
    if m >= n {
        // syminvadj(triu(gA)): X + Xᴴ with the diagonal halved.
        let t = ga.triu(0)?;
        let sym = t.add(&mt(&t)?)?;
        let half = diag(&sym.diagonal(0, -2, -1)?.mul(0.5)?)?;
        let sym = sym.sub(&half)?;
        ga = mm(q, &sym)?;
        if let Some(gq) = gq {
            ga = ga.add(gq)?;
        }
        // X Rᴴ = gA.
        return right_solve(&ga, &mt(r)?);
    }
    let x = ga.neg()?;
    let skew = x.sub(&mt(&x)?)?.tril(0)?;
    let mut out = mm(q, &skew)?;
    let r1 = r.narrow(-1, 0, m as i64)?;
    out = right_solve(&out, &mt(&r1)?)?;
    let mut zshape = out.shape().to_vec();
    let last = zshape.len() - 1;
    zshape[last] = n - m;
    let zeros = Tensor::zeros(&zshape, out.dtype(), out.device())?;
    out = Tensor::cat(&[&out, &zeros], -1)?;
    if let Some(gr) = gr {
        out = out.add(&mm(q, gr)?)?;
    }
    Ok(out)
}

/// `linalg_eig_backward` with `is_hermitian` (eigh).
pub(super) fn eigh_backward(
    gl: Option<&Tensor>,
    gv: Option<&Tensor>,
    l: &Tensor,
    v: &Tensor,
) -> Result<Tensor> {
    let vh = mt(v)?;
    let Some(gv) = gv else {
        let gl = gl.expect("the caller checks");
        return mm(&v.mul(&gl.unsqueeze(-2)?)?, &vh);
    };
    let vhgv = mm(&vh, gv)?;
    let vhgv = vhgv.sub(&mt(&vhgv)?)?.mul(0.5)?;
    // E_ij = L_j - L_i, ones on the diagonal.
    let e = l.unsqueeze(-2)?.sub(&l.unsqueeze(-1)?)?;
    let ones = diag(&l.ones_like(None)?)?;
    let e = e.add(&ones)?;
    let mut ga = vhgv.div(&e)?;
    if let Some(gl) = gl {
        let d = diag(&ga.diagonal(0, -2, -1)?)?;
        ga = ga.sub(&d)?.add(&diag(gl)?)?;
    }
    mm(v, &mm(&ga, &vh)?)
}

/// `svd_backward` (the reduced factors: `U` `[.., m, k]`, `Vh` `[.., k, n]`).
pub(super) fn svd_backward(
    gu: Option<&Tensor>,
    gs: Option<&Tensor>,
    gvh: Option<&Tensor>,
    u: &Tensor,
    s: &Tensor,
    vh: &Tensor,
) -> Result<Tensor> {
    let m = u.shape()[u.ndim() - 2];
    let n = vh.shape()[vh.ndim() - 1];
    if gu.is_none() && gvh.is_none() {
        let gs = gs.expect("the caller checks");
        return if m >= n {
            mm(u, &gs.unsqueeze(-1)?.mul(vh)?)
        } else {
            mm(&u.mul(&gs.unsqueeze(-2)?)?, vh)
        };
    }
    let skew = |x: Tensor| -> Result<Tensor> { Ok(x.sub(&mt(&x)?)?) };
    let uhgu = gu.map(|gu| skew(mm(&mt(u)?, gu)?)).transpose()?;
    let vhgv = gvh.map(|gvh| skew(mm(vh, &mt(gvh)?)?)).transpose()?;
    let s2 = s.mul(s)?;
    let e = s2.unsqueeze(-2)?.sub(&s2.unsqueeze(-1)?)?;
    let e = e.add(&diag(&s.ones_like(None)?)?)?;
    let mut ga = match (&uhgu, &vhgv) {
        (Some(a), Some(b)) => a
            .mul(&s.unsqueeze(-2)?)?
            .add(&s.unsqueeze(-1)?.mul(b)?)?
            .div(&e)?,
        (Some(a), None) => a.div(&e)?.mul(&s.unsqueeze(-2)?)?,
        (None, Some(b)) => s.unsqueeze(-1)?.mul(&b.div(&e)?)?,
        (None, None) => unreachable!(),
    };
    if let Some(gs) = gs {
        ga = ga.add(&diag(gs)?)?;
    }
    if m > n {
        if let Some(gu) = gu {
            ga = mm(u, &ga)?;
            let gusinv = gu.div(&s.unsqueeze(-2)?)?;
            ga = ga.add(&gusinv)?.sub(&mm(u, &mm(&mt(u)?, &gusinv)?)?)?;
            return mm(&ga, vh);
        }
    }
    if m < n {
        if let Some(gvh) = gvh {
            ga = mm(&ga, vh)?;
            let sinvgvh = gvh.div(&s.unsqueeze(-1)?)?;
            ga = ga.add(&sinvgvh)?.sub(&mm(&mm(&sinvgvh, &mt(vh)?)?, vh)?)?;
            return mm(u, &ga);
        }
    }
    if m >= n {
        mm(u, &mm(&ga, vh)?)
    } else {
        mm(&mm(u, &ga)?, vh)
    }
}

/// `pinv_backward`.
pub(super) fn pinv_backward(g: &Tensor, pinv: &Tensor, a: &Tensor) -> Result<Tensor> {
    let m = a.shape()[a.ndim() - 2];
    let n = a.shape()[a.ndim() - 1];
    let pinvh = mt(pinv)?;
    let gh = mt(g)?;
    if m <= n {
        let k = mm(&gh, pinv)?;
        let kpinvh = mm(&k, &pinvh)?;
        let t1 = mt(&mm(pinv, &k)?)?.neg()?;
        let t3 = mm(&mm(a, pinv)?, &kpinvh)?;
        let t4 = mm(&mm(&pinvh, pinv)?, &gh.sub(&mm(&k, a)?)?)?;
        Ok(t1.add(&kpinvh)?.sub(&t3)?.add(&t4)?)
    } else {
        let k = mm(pinv, &gh)?;
        let pinvhk = mm(&pinvh, &k)?;
        let t1 = mt(&mm(&k, pinv)?)?.neg()?;
        let t2 = mm(&mm(&gh.sub(&mm(a, &k)?)?, pinv)?, &pinvh)?;
        let t4 = mm(&mm(&pinvhk, pinv)?, a)?;
        Ok(t1.add(&t2)?.add(&pinvhk)?.sub(&t4)?)
    }
}
