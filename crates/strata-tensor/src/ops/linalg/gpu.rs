//! The factorizations of GPU tensors through cuSOLVER (session 80;
//! `backend/cuda/cusolver.rs` runs the calls): each function answers
//! `Ok(None)` where cuSOLVER does not take the input, and the caller then
//! factors on the host (`host.rs`) as before. That is the case on the CPU,
//! where cuSOLVER cannot be loaded (`crate::cuda::cusolver_version` says
//! why), where [`set_cusolver_enabled`]`(false)` turned it off (it is on by
//! default since session 81 ran it on an H100), for empty inputs (no
//! cuSOLVER call; the host path makes their results without work), for a
//! matrix dim above `i32::MAX` (cuSOLVER's sizes are C ints) or a matrix or
//! full factor of more elements than that (the legacy 32-bit API is not
//! trusted with them; the 64-bit `cusolverDnX*` API would be), for a batch
//! holding a matrix whose largest magnitude is beyond 2^±500 (f32: 2^±60),
//! which the host path scales by a power of two first, and for an
//! input holding NaN or infinity (LAPACK implementations differ on them;
//! the host path's answers, errors included, are strata's, so such an input
//! is read to the host and computed there).
//!
//! What is read back: the `info` array of the calls whose failures are
//! errors (`syevd`, `gesvd`), U's diagonal after `getrf` (the zero pivot
//! that makes a matrix singular, the determinant and its sign: the host's
//! formulas on the same numbers) and the factor's diagonal and `info` after
//! `potrf`. The errors are the host path's, with its words and its
//! numbering: the first failing matrix of the batch in order.
//!
//! Column-major conventions (cuSOLVER reads a row-major `r x c` buffer as
//! its `c x r` transpose): LU and QR factor a column-major copy of `A`
//! (`A.mT()` made row-major), so the pivots, the zero-pivot index and the
//! reflectors are `A`'s; `inv` solves `Aᵀ X = I` with those factors
//! (`getrs` with `'T'`), whose column-major `X = A⁻¹ᵀ` is `A⁻¹` row-major;
//! Cholesky and `eigh` factor a row-major copy with `uplo` flipped (the
//! lower triangle of `A` is the upper one of `Aᵀ`); the SVD of a wide `A`
//! is that of its row-major copy (`Aᵀ`, tall as `gesvd` needs), whose `U`
//! and `Vᵀ` read row-major are `A`'s `Vh` and `U`.
//!
//! Signs: cuSOLVER's QR, eigenvectors and singular vectors may differ in
//! sign from `faer`'s (the host path); neither is normalised (the PyTorch
//! comparisons normalise both sides), and the products they reconstruct do
//! not depend on them.

use super::host::{shape_of, tensor, Lin};
use super::{batch_of, Uplo};
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use strata_alloc::Device;

#[cfg(feature = "cuda")]
use crate::backend::cuda::cusolver::{available, fits, Gesvd, Session};
#[cfg(not(feature = "cuda"))]
use stub::{available, fits, Gesvd, Session};

/// The cuSOLVER calls this file makes, as `backend/cuda/cusolver.rs`'s
/// `Session` makes them (see its methods); in unit tests also a host
/// emulation (`gpu_emulation.rs`: LAPACK's column-major semantics on CPU
/// tensors), which checks this file's conventions without a GPU.
trait Solver {
    fn getrf(&self, a: &Tensor, count: usize, n: usize) -> Result<(Tensor, Tensor)>;
    #[allow(clippy::too_many_arguments)]
    fn getrs(
        &self,
        lu: &Tensor,
        ipiv: &Tensor,
        b: &Tensor,
        count: usize,
        n: usize,
        nrhs: usize,
        trans: bool,
    ) -> Result<()>;
    fn potrf(&self, a: &Tensor, count: usize, n: usize, upper: bool) -> Result<Tensor>;
    fn geqrf(&self, a: &Tensor, count: usize, m: usize, n: usize) -> Result<Tensor>;
    #[allow(clippy::too_many_arguments)]
    fn orgqr(
        &self,
        a: &Tensor,
        per: usize,
        tau: &Tensor,
        count: usize,
        m: usize,
        cols: usize,
        k: usize,
    ) -> Result<()>;
    fn syevd(
        &self,
        a: &Tensor,
        count: usize,
        n: usize,
        upper: bool,
        vectors: bool,
    ) -> Result<(Tensor, Tensor)>;
    fn gesvd(
        &self,
        a: &Tensor,
        count: usize,
        m: usize,
        n: usize,
        vectors: bool,
        full: bool,
    ) -> Result<Gesvd>;
}

impl Solver for Session {
    fn getrf(&self, a: &Tensor, count: usize, n: usize) -> Result<(Tensor, Tensor)> {
        Session::getrf(self, a, count, n)
    }
    fn getrs(
        &self,
        lu: &Tensor,
        ipiv: &Tensor,
        b: &Tensor,
        count: usize,
        n: usize,
        nrhs: usize,
        trans: bool,
    ) -> Result<()> {
        Session::getrs(self, lu, ipiv, b, count, n, nrhs, trans)
    }
    fn potrf(&self, a: &Tensor, count: usize, n: usize, upper: bool) -> Result<Tensor> {
        Session::potrf(self, a, count, n, upper)
    }
    fn geqrf(&self, a: &Tensor, count: usize, m: usize, n: usize) -> Result<Tensor> {
        Session::geqrf(self, a, count, m, n)
    }
    fn orgqr(
        &self,
        a: &Tensor,
        per: usize,
        tau: &Tensor,
        count: usize,
        m: usize,
        cols: usize,
        k: usize,
    ) -> Result<()> {
        Session::orgqr(self, a, per, tau, count, m, cols, k)
    }
    fn syevd(
        &self,
        a: &Tensor,
        count: usize,
        n: usize,
        upper: bool,
        vectors: bool,
    ) -> Result<(Tensor, Tensor)> {
        Session::syevd(self, a, count, n, upper, vectors)
    }
    fn gesvd(
        &self,
        a: &Tensor,
        count: usize,
        m: usize,
        n: usize,
        vectors: bool,
        full: bool,
    ) -> Result<Gesvd> {
        Session::gesvd(self, a, count, m, n, vectors, full)
    }
}

#[cfg(test)]
#[path = "gpu_emulation.rs"]
mod emulation;

/// The environment variable that turns the cuSOLVER path off for a process
/// from its start (`0`, `false`, `off` or `no`), as
/// [`set_cusolver_enabled`]`(false)` does.
pub const CUSOLVER_VAR: &str = "STRATA_CUSOLVER";

/// On unless the process starts with [`CUSOLVER_VAR`] saying no. Session 80
/// wrote the path on a machine without a GPU and left it off; session 81
/// ran it on an H100 (`tests/suite/cusolver_s80.rs` against the host path,
/// `linalg_s79`'s PyTorch replays of both crates through it, and
/// compute-sanitizer's memcheck with no error) and turned it on.
static CUSOLVER_ENABLED: LazyLock<AtomicBool> =
    LazyLock::new(|| AtomicBool::new(!switched_off(std::env::var(CUSOLVER_VAR).ok().as_deref())));

/// Whether a switch variable's value turns it off (`0`, `false`, `off`,
/// `no`, any case, spaces around ignored); unset or anything else leaves
/// it on.
fn switched_off(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "off" | "no"
        )
    })
}

/// Whether `strata_tensor::linalg` may factor GPU tensors with cuSOLVER
/// where it loads, for the whole process (`true` by default; start the
/// process with `STRATA_CUSOLVER=0` to begin with `false`). With `false`,
/// or without cuSOLVER ([`crate::cuda::cusolver_version`]), the matrices of
/// a GPU tensor are copied to the host, factored there with `faer` and the
/// results copied back (the same results up to rounding and the signs of
/// QR factors and singular and eigen-vectors). The CPU is not affected.
///
/// ```
/// use strata_tensor::linalg::{cusolver_enabled, set_cusolver_enabled};
/// set_cusolver_enabled(false); // GPU factorizations on the host
/// assert!(!cusolver_enabled());
/// set_cusolver_enabled(true); // through cuSOLVER (the default)
/// assert!(cusolver_enabled());
/// ```
pub fn set_cusolver_enabled(enabled: bool) {
    CUSOLVER_ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether GPU factorizations may use cuSOLVER (see [`set_cusolver_enabled`]).
pub fn cusolver_enabled() -> bool {
    CUSOLVER_ENABLED.load(Ordering::Relaxed)
}

/// Whether cuSOLVER takes `inputs` (the first is the one factored) whose
/// matrix dims and buffer sizes are `dims`: a GPU, cuSOLVER enabled and
/// loaded, elements in every input, dims that fit an int, matrices of at
/// most `i32::MAX` elements (the legacy 32-bit API is not trusted with more:
/// such matrices go to the host, slowly but right), and in the first finite
/// values and no matrix that the host path would scale first.
fn takes(inputs: &[&Tensor], dims: &[usize]) -> Result<bool> {
    let Some(a) = inputs.first() else {
        return Ok(false);
    };
    let matrix = |t: &&Tensor| {
        let nd = t.ndim();
        t.shape()[nd - 2].saturating_mul(t.shape()[nd - 1])
    };
    // The unit tests' emulation stands in for the library and its switch.
    if !(matches!(a.device(), Device::Cuda(_)) || emulated(a))
        || !(emulated(a) || cusolver_enabled())
        || inputs.iter().any(|t| t.numel() == 0)
        || !fits(dims)
        || !fits(&inputs.iter().map(matrix).collect::<Vec<_>>())
        || !(emulated(a) || available())
    {
        return Ok(false);
    }
    if !a.isfinite()?.all()?.item::<bool>()? {
        return Ok(false);
    }
    // The host path factors a matrix whose largest magnitude is beyond
    // 2^±500 (f32: 2^±60) scaled by a power of two (`host::scale_exp`);
    // such a batch is left to it, so that its answers stay the host's.
    let lim = if a.dtype() == crate::dtype::DType::F32 {
        60
    } else {
        500
    };
    let max = a.abs()?.max_dim(-1, false)?.0.max_dim(-1, false)?.0;
    Ok(max
        .to_vec_as::<f64>()?
        .iter()
        .all(|&m| m == 0.0 || (m.is_finite() && (m.log2().floor() as i64 + 1).abs() <= lim)))
}

/// Whether `a` is a CPU tensor that a unit test sends through the host
/// emulation of cuSOLVER (never outside unit tests).
fn emulated(_a: &Tensor) -> bool {
    #[cfg(test)]
    {
        if emulation::on() && _a.device() == Device::Cpu {
            return true;
        }
    }
    false
}

/// The session for `a`'s device and dtype (`None`: the host path).
fn open(a: &Tensor) -> Result<Option<Box<dyn Solver>>> {
    #[cfg(test)]
    {
        if emulated(a) {
            return Ok(Some(Box::new(emulation::Host)));
        }
    }
    Ok(Session::open(a.device(), a.dtype())?.map(|s| Box::new(s) as Box<dyn Solver>))
}

/// `[.., r, c]` → `(batch dims, r, c, matrices)`.
fn dims(a: &Tensor) -> (Vec<usize>, usize, usize, usize) {
    let nd = a.ndim();
    let batch = a.shape()[..nd - 2].to_vec();
    let count = batch.iter().product();
    (batch, a.shape()[nd - 2], a.shape()[nd - 1], count)
}

/// A fresh row-major copy of `a`'s transpose: `a` column-major.
fn col_major(a: &Tensor) -> Result<Tensor> {
    a.transpose(-2, -1)?.clone_contiguous()
}

fn i64s(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// `t` (`[count, ..]`) with the batch dims `batch` in place of `count`.
fn unbatch(t: &Tensor, batch: &[usize], tail: &[usize]) -> Result<Tensor> {
    t.reshape(&i64s(&shape_of(batch, tail)))
}

/// The LU factors of each matrix of `a` (`[.., n, n]`, column-major in a
/// fresh buffer), their pivots, and per matrix U's diagonal and the host's
/// `info` (the 1-based first exactly zero pivot, 0 if none) and the
/// permutation's sign.
struct Lu<T> {
    lu: Tensor,
    ipiv: Tensor,
    diag: Vec<T>,
    info: Vec<usize>,
    sign: Vec<f64>,
    n: usize,
    count: usize,
}

/// [`takes`] is asked unless the caller did (`checked`).
fn lu<T: Lin>(a: &Tensor, checked: bool) -> Result<Option<Lu<T>>> {
    let (_, _, n, count) = dims(a);
    if !checked && !takes(&[a], &[n])? {
        return Ok(None);
    }
    let lu = col_major(a)?;
    let ipiv = {
        let Some(s) = open(a)? else {
            return Ok(None);
        };
        s.getrf(&lu, count, n)?.0
    };
    // U's diagonal (the buffer's diagonal, whichever way it is read).
    let diag = lu.diagonal(0, -2, -1)?.to_vec::<T>()?;
    let piv = ipiv.to_vec::<i32>()?;
    let mut info = Vec::with_capacity(count);
    let mut sign = Vec::with_capacity(count);
    for k in 0..count {
        let d = &diag[k * n..(k + 1) * n];
        info.push(d.iter().position(|v| v.to64() == 0.0).map_or(0, |i| i + 1));
        let swaps = piv[k * n..(k + 1) * n]
            .iter()
            .enumerate()
            .filter(|&(i, &p)| p as i64 != i as i64 + 1)
            .count();
        sign.push(if swaps % 2 == 0 { 1.0 } else { -1.0 });
    }
    Ok(Some(Lu {
        lu,
        ipiv,
        diag,
        info,
        sign,
        n,
        count,
    }))
}

impl<T: Lin> Lu<T> {
    /// `host::Lu::det`'s formula on matrix `k`.
    fn det(&self, k: usize) -> T {
        if self.info[k] != 0 {
            return T::of(0.0);
        }
        let mut d = T::of(self.sign[k]);
        for &u in &self.diag[k * self.n..(k + 1) * self.n] {
            d = d * u;
        }
        d
    }

    /// `host::Lu::slogdet`'s formula on matrix `k`.
    fn slogdet(&self, k: usize) -> (T, T) {
        if self.info[k] != 0 {
            return (T::of(0.0), T::of(f64::NEG_INFINITY));
        }
        let mut sign = self.sign[k];
        let mut log = T::of(0.0);
        for &u in &self.diag[k * self.n..(k + 1) * self.n] {
            let d = u.to64();
            if d.is_nan() {
                // PyTorch's sign is the product of the pivots' signs, and
                // sign(NaN) is 0.
                return (T::of(0.0), T::of(f64::NAN));
            }
            if d < 0.0 {
                sign = -sign;
            }
            log = log + T::of(T::of(d.abs()).to64().ln());
        }
        (T::of(sign), log)
    }

    /// The first singular matrix: `(k, info)`.
    fn first_singular(&self) -> Option<(usize, usize)> {
        self.info
            .iter()
            .enumerate()
            .find(|&(_, &i)| i != 0)
            .map(|(k, &i)| (k, i))
    }

    /// `b` (`[count, nrhs, n]` row-major: column-major `n x nrhs`) solved
    /// in place with `A` (`trans`: `Aᵀ`).
    fn solve_in_place(&self, like: &Tensor, b: &Tensor, nrhs: usize, trans: bool) -> Result<bool> {
        let Some(s) = open(like)? else {
            return Ok(false);
        };
        s.getrs(&self.lu, &self.ipiv, b, self.count, self.n, nrhs, trans)?;
        Ok(true)
    }

    /// The inverses of every matrix (`[.., n, n]` row-major, shaped as
    /// `a`): `getrs` of `Aᵀ X = I`, whose column-major X is `A⁻¹` row-major.
    fn inverses(&self, a: &Tensor) -> Result<Option<Tensor>> {
        let eye = Tensor::eye(self.n, None, a.dtype(), a.device())?
            .expand(&i64s(a.shape()))?
            .clone_contiguous()?;
        Ok(self.solve_in_place(a, &eye, self.n, true)?.then_some(eye))
    }
}

/// `linalg.det` of a GPU tensor (`[.., n, n]`).
pub(super) fn det<T: Lin>(a: &Tensor) -> Result<Option<Tensor>> {
    let Some(f) = lu::<T>(a, false)? else {
        return Ok(None);
    };
    let out: Vec<T> = (0..f.count).map(|k| f.det(k)).collect();
    Ok(Some(tensor(out, &dims(a).0, a.device())?))
}

/// `linalg.slogdet` of a GPU tensor.
pub(super) fn slogdet<T: Lin>(a: &Tensor) -> Result<Option<(Tensor, Tensor)>> {
    let Some(f) = lu::<T>(a, false)? else {
        return Ok(None);
    };
    let (mut signs, mut logs) = (Vec::with_capacity(f.count), Vec::with_capacity(f.count));
    for k in 0..f.count {
        let (s, l) = f.slogdet(k);
        signs.push(s);
        logs.push(l);
    }
    let batch = dims(a).0;
    Ok(Some((
        tensor(signs, &batch, a.device())?,
        tensor(logs, &batch, a.device())?,
    )))
}

/// `linalg.inv` of a GPU tensor.
pub(super) fn inv<T: Lin>(a: &Tensor) -> Result<Option<Tensor>> {
    let Some(f) = lu::<T>(a, false)? else {
        return Ok(None);
    };
    if let Some((k, index)) = f.first_singular() {
        return Err(TensorError::Singular {
            op: "linalg.inv",
            batch: batch_of(a, k),
            index,
        });
    }
    f.inverses(a)
}

/// PyTorch's `inv_ex` (for `cond`): the inverses, zeros for a singular
/// matrix, and which were singular.
pub(super) fn inv_ex<T: Lin>(a: &Tensor) -> Result<Option<(Tensor, Vec<bool>)>> {
    let Some(f) = lu::<T>(a, false)? else {
        return Ok(None);
    };
    let singular: Vec<bool> = f.info.iter().map(|&i| i != 0).collect();
    let Some(x) = f.inverses(a)? else {
        return Ok(None);
    };
    let x = if singular.iter().any(|&s| s) {
        let mask = Tensor::from_vec(singular.clone(), &shape_of(&dims(a).0, &[1, 1]), a.device())?;
        Tensor::where_cond(&mask, 0.0, &x)?
    } else {
        x
    };
    Ok(Some((x, singular)))
}

/// `linalg.solve` of GPU tensors `a` (`[.., n, n]`) and `b` (`[.., n, k]`),
/// batch dims already broadcast.
pub(super) fn solve<T: Lin>(a: &Tensor, b: &Tensor, batched: bool) -> Result<Option<Tensor>> {
    let (_, n, k, _) = dims(b);
    if !takes(&[a, b], &[n, k])? {
        return Ok(None);
    }
    let Some(f) = lu::<T>(a, true)? else {
        return Ok(None);
    };
    if let Some((i, index)) = f.first_singular() {
        return Err(TensorError::Singular {
            op: "torch.linalg.solve",
            batch: batched.then_some(i),
            index,
        });
    }
    let x = col_major(b)?;
    if !f.solve_in_place(a, &x, k, false)? {
        return Ok(None);
    }
    Ok(Some(x.transpose(-2, -1)?.contiguous()?))
}

/// `linalg.cholesky` of a GPU tensor: potrf of the row-major copy (`Aᵀ`
/// column-major) from the other triangle; the errors and their order as
/// `host::cholesky` gives them (the first pivot that is not positive or is
/// NaN).
pub(super) fn cholesky<T: Lin>(a: &Tensor, upper: bool) -> Result<Option<Tensor>> {
    let (_, _, n, count) = dims(a);
    if !takes(&[a], &[n])? {
        return Ok(None);
    }
    let buf = a.clone_contiguous()?;
    let info = {
        let Some(s) = open(a)? else {
            return Ok(None);
        };
        s.potrf(&buf, count, n, !upper)?
    };
    let info = info.to_vec::<i32>()?;
    let diag = buf.diagonal(0, -2, -1)?.to_vec::<T>()?;
    for (k, &i) in info.iter().enumerate() {
        // Columns before a failing pivot are factored; later ones not.
        let done = if i > 0 { (i as usize - 1).min(n) } else { n };
        let bad = diag[k * n..k * n + done]
            .iter()
            .position(|d| d.to64().is_nan() || d.to64() <= 0.0)
            .map(|p| p + 1)
            .or((i > 0).then_some(i as usize));
        if let Some(order) = bad {
            return Err(TensorError::NotPositiveDefinite {
                op: "linalg.cholesky",
                batch: batch_of(a, k),
                order,
            });
        }
    }
    // The factor is in the triangle read; the other holds the input.
    Ok(Some(if upper { buf.triu(0)? } else { buf.tril(0)? }))
}

/// `linalg.qr` of a GPU tensor: geqrf of a column-major copy, R from its
/// upper triangle, Q by orgqr (into a wider buffer for the complete Q of a
/// tall matrix). `complete`: Q `m x m`, R `m x n`; `with_q`: Q computed
/// (else an empty `[0]` tensor, mode `'r'`).
pub(super) fn qr<T: Lin>(
    a: &Tensor,
    complete: bool,
    with_q: bool,
) -> Result<Option<(Tensor, Tensor)>> {
    let (batch, m, n, count) = dims(a);
    let q_elems = if complete && with_q {
        m.saturating_mul(m)
    } else {
        0
    };
    if !takes(&[a], &[m, n, q_elems])? {
        return Ok(None);
    }
    let k = m.min(n);
    let buf = col_major(a)?;
    let Some(s) = open(a)? else {
        return Ok(None);
    };
    let tau = s.geqrf(&buf, count, m, n)?;
    let rr = if complete { m } else { k };
    // Queued before orgqr overwrites the buffer (one stream).
    let r = buf.transpose(-2, -1)?.narrow(-2, 0, rr as i64)?.triu(0)?;
    if !with_q {
        drop(s);
        return Ok(Some((Tensor::zeros(&[0], a.dtype(), a.device())?, r)));
    }
    let q = if complete && m > n {
        let wide = Tensor::zeros(&shape_of(&batch, &[m, m]), a.dtype(), a.device())?;
        wide.narrow(-2, 0, n as i64)?.copy_(&buf)?;
        s.orgqr(&wide, m * m, &tau, count, m, m, k)?;
        wide
    } else {
        s.orgqr(&buf, m * n, &tau, count, m, k, k)?;
        buf.narrow(-2, 0, k as i64)?
    };
    drop(s);
    Ok(Some((q.transpose(-2, -1)?.contiguous()?, r)))
}

/// `linalg.eigh` / `linalg.eigvalsh` of a GPU tensor: syevd of the
/// row-major copy (`Aᵀ` column-major) from the other triangle; with
/// `vectors` the eigenvectors are the copy's columns read column-major.
pub(super) fn eigh<T: Lin>(
    a: &Tensor,
    uplo: Uplo,
    vectors: bool,
) -> Result<Option<(Tensor, Tensor)>> {
    let op = if vectors {
        "linalg.eigh"
    } else {
        "linalg.eigvalsh"
    };
    eigh_as::<T>(op, a, uplo, vectors)
}

/// [`eigh`] whose failures name `op`.
fn eigh_as<T: Lin>(
    op: &'static str,
    a: &Tensor,
    uplo: Uplo,
    vectors: bool,
) -> Result<Option<(Tensor, Tensor)>> {
    let (batch, _, n, count) = dims(a);
    if !takes(&[a], &[n])? {
        return Ok(None);
    }
    let buf = a.clone_contiguous()?;
    let (w, info) = {
        let Some(s) = open(a)? else {
            return Ok(None);
        };
        s.syevd(&buf, count, n, uplo == Uplo::Lower, vectors)?
    };
    first_failure(a, op, &info)?;
    let l = unbatch(&w, &batch, &[n])?;
    let v = if vectors {
        buf.transpose(-2, -1)?.contiguous()?
    } else {
        Tensor::zeros(&[0], a.dtype(), a.device())?
    };
    Ok(Some((l, v)))
}

/// The error of the first matrix whose `info` is not 0 (an algorithm that
/// did not converge), in the host path's words.
fn first_failure(a: &Tensor, op: &'static str, info: &Tensor) -> Result<()> {
    let info = info.to_vec::<i32>()?;
    match info.iter().position(|&i| i != 0) {
        Some(k) => Err(super::host::no_convergence(
            op,
            batch_of(a, k),
            "The algorithm failed to converge.",
        )),
        None => Ok(()),
    }
}

/// `linalg.svd` (`vectors`) or `linalg.svdvals` of a GPU tensor:
/// `(U, S, Vh)` (U and Vh empty without `vectors`). gesvd needs `m >= n`:
/// a tall `A` is factored column-major (U and Vᵀ read back transposed), a
/// wide one as its row-major copy `Aᵀ`, whose U and Vᵀ read row-major are
/// `A`'s Vh and U.
pub(super) fn svd<T: Lin>(
    a: &Tensor,
    vectors: bool,
    full: bool,
) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    svd_as::<T>("linalg.svd", a, vectors, full)
}

/// [`svd`] whose failures name `op`.
fn svd_as<T: Lin>(
    op: &'static str,
    a: &Tensor,
    vectors: bool,
    full: bool,
) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    let (batch, m, n, count) = dims(a);
    // U and Vᵀ of a full SVD are m x m and n x n.
    let (um, vn) = if vectors && full {
        (m.saturating_mul(m), n.saturating_mul(n))
    } else {
        (0, 0)
    };
    if !takes(&[a], &[m, n, um, vn])? {
        return Ok(None);
    }
    let k = m.min(n);
    let tall = m >= n;
    let (buf, mm, nn) = if tall {
        (col_major(a)?, m, n)
    } else {
        (a.clone_contiguous()?, n, m)
    };
    let g = {
        let Some(s) = open(a)? else {
            return Ok(None);
        };
        s.gesvd(&buf, count, mm, nn, vectors, full)?
    };
    first_failure(a, op, &g.info)?;
    let s = unbatch(&g.s, &batch, &[k])?;
    let (Some(u), Some(vt)) = (g.u, g.vt) else {
        let empty = Tensor::zeros(&[0], a.dtype(), a.device())?;
        return Ok(Some((empty.clone(), s, empty)));
    };
    // `u`: [count, uc, mm] (column-major mm x uc); `vt`: [count, nn, nn].
    let uc = u.shape()[1];
    let (u, vh) = if tall {
        (
            unbatch(&u, &batch, &[uc, m])?
                .transpose(-2, -1)?
                .contiguous()?,
            unbatch(&vt, &batch, &[n, n])?
                .transpose(-2, -1)?
                .contiguous()?,
        )
    } else {
        (
            unbatch(&vt, &batch, &[m, m])?,
            unbatch(&u, &batch, &[uc, n])?,
        )
    };
    Ok(Some((u, s, vh)))
}

/// `linalg.pinv` of a GPU tensor (`[.., m, n]` → `[.., n, m]`) with the
/// tolerances already defaulted: `V diag(1/σ) Uᵀ` over the singular values
/// above `max(atol, rtol σ_max)` (with `hermitian`, `U diag(1/λ) Uᵀ` over
/// the eigenvalues of the lower triangle above it in magnitude), as
/// `derived::pinv_imp` computes it on the host, here with tensor ops on the
/// GPU factors.
pub(super) fn pinv<T: Lin>(
    a: &Tensor,
    (atol, rtol): (f64, f64),
    hermitian: bool,
) -> Result<Option<Tensor>> {
    const OP: &str = "linalg.pinv";
    if !(atol.is_finite() && rtol.is_finite()) {
        // NaN or infinite tolerances: the host path's `nan_max` rules.
        return Ok(None);
    }
    let keep = |x: &Tensor, max: &Tensor| -> Result<Tensor> {
        // max(atol, rtol * max) per matrix, and 1/x where |x| is above it.
        let tol = max.mul(rtol)?.clamp(Some(atol), None::<f64>)?;
        let inv = Tensor::where_cond(&x.abs()?.gt(&tol)?, &x.reciprocal()?, 0.0)?;
        inv.unsqueeze(-2)
    };
    if hermitian {
        let Some((l, u)) = eigh_as::<T>(OP, a, Uplo::Lower, true)? else {
            return Ok(None);
        };
        let max = l
            .abs()?
            .max_dim(-1, true)?
            .0
            .clamp(Some(0.0), None::<f64>)?;
        let scaled = u.mul(&keep(&l, &max)?)?;
        return Ok(Some(scaled.matmul(&u.transpose(-2, -1)?)?));
    }
    let Some((u, s, vh)) = svd_as::<T>(OP, a, true, false)? else {
        return Ok(None);
    };
    let max = s.narrow(-1, 0, 1)?;
    let scaled = vh.transpose(-2, -1)?.mul(&keep(&s, &max)?)?;
    Ok(Some(scaled.matmul(&u.transpose(-2, -1)?)?))
}

/// `linalg.lstsq` of GPU tensors `a` (`[.., m, n]`) and `b` (`[.., m, k]`),
/// batch dims already broadcast: `(X, ranks)` from the thin SVD, singular
/// values at most `rcond σ_max` treated as zero, as `derived::lstsq_imp`
/// computes them on the host.
pub(super) fn lstsq<T: Lin>(
    a: &Tensor,
    b: &Tensor,
    rcond: f64,
) -> Result<Option<(Tensor, Vec<i64>)>> {
    if !rcond.is_finite() || !takes(&[a, b], &[])? {
        return Ok(None);
    }
    let Some((u, s, vh)) = svd_as::<T>("torch.linalg.lstsq", a, true, false)? else {
        return Ok(None);
    };
    let tol = s.narrow(-1, 0, 1)?.mul(rcond)?;
    let above = s.gt(&tol)?;
    let inv = Tensor::where_cond(&above, &s.reciprocal()?, 0.0)?;
    let ranks = above.sum(Some(&[-1]), false)?.to_vec_as::<i64>()?;
    // X = V diag(1/s) Uᵀ B.
    let utb = u.transpose(-2, -1)?.matmul(b)?;
    let x = vh
        .transpose(-2, -1)?
        .matmul(&utb.mul(&inv.unsqueeze(-1)?)?)?
        .contiguous()?;
    Ok(Some((x, ranks)))
}

/// Without the `cuda` feature: cuSOLVER is never available.
#[cfg(not(feature = "cuda"))]
mod stub {
    use crate::dtype::DType;
    use crate::error::Result;
    use crate::tensor::Tensor;
    use strata_alloc::Device;

    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn fits(dims: &[usize]) -> bool {
        dims.iter().all(|&d| i32::try_from(d).is_ok())
    }

    /// No session can be opened.
    pub(super) enum Session {}

    /// As the real session, which releases its handle's lock when dropped.
    impl Drop for Session {
        fn drop(&mut self) {
            match *self {}
        }
    }

    pub(super) struct Gesvd {
        pub s: Tensor,
        pub u: Option<Tensor>,
        pub vt: Option<Tensor>,
        pub info: Tensor,
    }

    #[allow(clippy::too_many_arguments)]
    impl Session {
        pub(super) fn open(_: Device, _: DType) -> Result<Option<Session>> {
            Ok(None)
        }
        pub(super) fn getrf(&self, _: &Tensor, _: usize, _: usize) -> Result<(Tensor, Tensor)> {
            match *self {}
        }
        pub(super) fn getrs(
            &self,
            _: &Tensor,
            _: &Tensor,
            _: &Tensor,
            _: usize,
            _: usize,
            _: usize,
            _: bool,
        ) -> Result<()> {
            match *self {}
        }
        pub(super) fn potrf(&self, _: &Tensor, _: usize, _: usize, _: bool) -> Result<Tensor> {
            match *self {}
        }
        pub(super) fn geqrf(&self, _: &Tensor, _: usize, _: usize, _: usize) -> Result<Tensor> {
            match *self {}
        }
        pub(super) fn orgqr(
            &self,
            _: &Tensor,
            _: usize,
            _: &Tensor,
            _: usize,
            _: usize,
            _: usize,
            _: usize,
        ) -> Result<()> {
            match *self {}
        }
        pub(super) fn syevd(
            &self,
            _: &Tensor,
            _: usize,
            _: usize,
            _: bool,
            _: bool,
        ) -> Result<(Tensor, Tensor)> {
            match *self {}
        }
        pub(super) fn gesvd(
            &self,
            _: &Tensor,
            _: usize,
            _: usize,
            _: usize,
            _: bool,
            _: bool,
        ) -> Result<Gesvd> {
            match *self {}
        }
    }
}

#[cfg(test)]
mod switch_tests {
    use super::switched_off;

    #[test]
    fn the_switch_variable_turns_it_off_only_with_no_words() {
        for v in ["0", "false", "FALSE", " off ", "No"] {
            assert!(switched_off(Some(v)), "{v:?}");
        }
        for v in ["", "1", "true", "on", "yes", "2", "disable"] {
            assert!(!switched_off(Some(v)), "{v:?}");
        }
        assert!(!switched_off(None));
    }
}
