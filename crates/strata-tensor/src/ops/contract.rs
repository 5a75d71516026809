//! Contractions and diagonals (session 60): `einsum`, `tensordot`, `inner`,
//! `outer`, `kron`; `diagonal` (a view), `diag`, `diag_embed`, `trace`; the
//! scaled products `baddbmm`, `addbmm`, `addmv`, `addr`; `lerp` and `cross`.
//!
//! Every op here is composed from existing ops (views, `mul`, `sum`,
//! `addcmul`, `where`, `bmm`/`mm`/`addmm` and their backends' GEMMs), so it
//! runs on every device and dtype those do, with no kernel of its own:
//!
//! * the contractions are permutes and reshapes around one batched matrix
//!   product per pair of operands (PyTorch's `sumproduct_pair`), as fast as
//!   the equivalent `bmm`;
//! * `lerp` and `cross` are PyTorch's CPU formulas written with `addcmul`
//!   (one fused multiply-add per element, as PyTorch's compiled kernels do),
//!   so that their values agree with PyTorch's CPU bit for bit.
//!
//! `einsum` and the other compositions are written once over
//! [`Composite`](crate::Composite), which strata-autograd implements for its `Var`: the
//! same algorithm records its gradients there.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::ops::composite::Composite;
use crate::scalar::Scalar;
use crate::shape::{broadcast_shapes, normalize_dim, normalize_dims};
use crate::tensor::Tensor;

/// The contracted dims of [`Tensor::tensordot`]: a count (the last `n` dims
/// of the first operand with the first `n` of the second, PyTorch's
/// `dims=n`) or two lists paired element by element (`dims=([..], [..])`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensordotDims<'a> {
    /// The last `n` dims of `a` with the first `n` of `b`.
    Count(i64),
    /// `a`'s dims `.0[i]` contracted with `b`'s dims `.1[i]`.
    Pairs(&'a [i64], &'a [i64]),
}

impl From<i64> for TensordotDims<'_> {
    fn from(n: i64) -> Self {
        TensordotDims::Count(n)
    }
}

impl<'a> From<(&'a [i64], &'a [i64])> for TensordotDims<'a> {
    fn from((a, b): (&'a [i64], &'a [i64])) -> Self {
        TensordotDims::Pairs(a, b)
    }
}

impl<'a, const N: usize> From<(&'a [i64; N], &'a [i64; N])> for TensordotDims<'a> {
    fn from((a, b): (&'a [i64; N], &'a [i64; N])) -> Self {
        TensordotDims::Pairs(a, b)
    }
}

/// The weight of [`Tensor::lerp`]: a scalar or a tensor.
#[derive(Clone, Copy, Debug)]
pub enum LerpWeight<'a> {
    /// One weight for every element.
    Scalar(Scalar),
    /// A weight per element (broadcast with `self` and `end`).
    Tensor(&'a Tensor),
}

impl<'a> From<&'a Tensor> for LerpWeight<'a> {
    fn from(t: &'a Tensor) -> Self {
        LerpWeight::Tensor(t)
    }
}

macro_rules! lerp_weight_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for LerpWeight<'_> {
            fn from(x: $t) -> Self {
                LerpWeight::Scalar(Scalar::from(x))
            }
        }
    )*};
}
lerp_weight_from_scalar!(Scalar, f32, f64, i32, i64);

fn dims_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// The layout of `diagonal(offset, dim1, dim2)` of a tensor of layout `l`
/// (dims already normalised and distinct): `dim1` and `dim2` removed, the
/// diagonal appended as the last dim with stride `stride1 + stride2`.
fn diagonal_layout(l: &Layout, offset: i64, d1: usize, d2: usize) -> Result<Layout> {
    let (s1, s2) = (l.shape[d1] as i128, l.shape[d2] as i128);
    let off = offset as i128;
    let len = if off >= 0 {
        s1.min(s2 - off)
    } else {
        (s1 + off).min(s2)
    }
    .max(0);
    let mut storage_offset = l.offset as i128;
    if len > 0 {
        storage_offset += if off >= 0 {
            off * l.strides[d2] as i128
        } else {
            -off * l.strides[d1] as i128
        };
    }
    let stride = l.strides[d1] as i128 + l.strides[d2] as i128;
    let too_big = |what: &str| {
        TensorError::overflow(
            "diagonal",
            format!("the diagonal's {what} does not fit an index of this platform"),
        )
    };
    let stride = usize::try_from(stride).map_err(|_| too_big("stride"))?;
    let storage_offset = usize::try_from(storage_offset).map_err(|_| too_big("storage offset"))?;
    let mut shape = Vec::with_capacity(l.shape.len() - 1);
    let mut strides = Vec::with_capacity(l.shape.len() - 1);
    for d in 0..l.shape.len() {
        if d != d1 && d != d2 {
            shape.push(l.shape[d]);
            strides.push(l.strides[d]);
        }
    }
    // `len` is at most min(s1, s2), a size of the tensor.
    shape.push(len as usize);
    strides.push(stride);
    Ok(Layout {
        shape,
        strides,
        offset: storage_offset,
    })
}

/// The two dims of a diagonal of a tensor of `ndim` dims, normalised and
/// distinct (PyTorch's errors: out of range, then identical).
fn diagonal_dims(op: &'static str, dim1: i64, dim2: i64, ndim: usize) -> Result<(usize, usize)> {
    let d1 = normalize_dim(op, dim1, ndim)?;
    let d2 = normalize_dim(op, dim2, ndim)?;
    if d1 == d2 {
        return Err(TensorError::dim(
            op,
            format!("diagonal dimensions cannot be identical {dim1}, {dim2}"),
        ));
    }
    Ok((d1, d2))
}

/// Whether a scalar argument (`beta`, `alpha`) is zero.
fn is_zero(s: Scalar) -> bool {
    s.to_f64() == 0.0
}

/// Whether a scalar argument is one (nothing to scale by).
fn is_one(s: Scalar) -> bool {
    match s {
        Scalar::Bool(b) => b,
        Scalar::Int(i) => i == 1,
        Scalar::Float(f) => f == 1.0,
    }
}

/// A scalar argument of `baddbmm`/`addbmm`/`addmv` as the product's dtype
/// takes it: truncated to an integer for integer dtypes (PyTorch's
/// `alpha.to<int64_t>()`: `alpha=0.5` on i64 operands scales by 0).
fn scale_for(s: Scalar, dtype: DType) -> Scalar {
    if dtype.is_float() {
        s
    } else {
        Scalar::Int(s.to_i64())
    }
}

/// `beta * input + alpha * product` with PyTorch's rules: `beta = 0` does
/// not read `input` (NaN there does not propagate), `alpha = 1` and
/// `beta = 1` multiply nothing. `input` broadcasts to the product's shape;
/// the result is a fresh row-major tensor of the product's shape.
fn scaled_sum(input: &Tensor, product: Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    let dtype = product.dtype();
    let (beta, alpha) = (scale_for(beta, dtype), scale_for(alpha, dtype));
    let p = if is_one(alpha) {
        product
    } else {
        product.mul(alpha)?
    };
    if is_zero(beta) {
        return p.row_major_exact();
    }
    let shape = dims_i64(p.shape());
    let s = input.expand(&shape)?;
    let s = if is_one(beta) { s } else { s.mul(beta)? };
    s.add(&p)?.row_major_exact()
}

impl Tensor {
    /// A view of the diagonal of `self` in the plane of dims `dim1` and
    /// `dim2` (PyTorch's `torch.diagonal`): those dims are removed and the
    /// diagonal becomes the last dim, sharing `self`'s storage (its stride
    /// is the sum of theirs). `offset > 0` takes a diagonal above the main
    /// one, `< 0` below; an offset past the edge gives an empty diagonal.
    ///
    /// Errors (typed): a dim out of range ([`TensorError::Dim`]; a 0-d or
    /// 1-D tensor has no second dim), `dim1` and `dim2` the same dim.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[0.0f32, 1., 2., 3., 4., 5.], &[2, 3], Device::Cpu).unwrap();
    /// let d = a.diagonal(1, 0, 1).unwrap();
    /// assert_eq!(d.to_vec::<f32>().unwrap(), vec![1.0, 5.0]);
    /// assert!(d.same_storage(&a) && d.strides() == [4]);
    /// ```
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        let (d1, d2) = diagonal_dims("diagonal", dim1, dim2, self.ndim())?;
        Ok(self.with_layout(diagonal_layout(self.layout(), offset, d1, d2)?))
    }

    /// PyTorch's `torch.diag`: a 1-D `self` becomes a square matrix of side
    /// `n + |diagonal|` with `self` on its `diagonal`-th diagonal and zeros
    /// elsewhere; a 2-D `self` gives a copy of its `diagonal`-th diagonal
    /// (1-D, row-major). Any dtype, bool included.
    ///
    /// Errors (typed): a `self` that is not 1-D or 2-D, a matrix side that
    /// overflows.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let v = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    /// let m = v.diag(1).unwrap();
    /// assert_eq!(m.to_vec::<i64>().unwrap(), vec![0, 1, 0, 0, 0, 2, 0, 0, 0]);
    /// assert_eq!(m.diag(1).unwrap().to_vec::<i64>().unwrap(), vec![1, 2]);
    /// ```
    pub fn diag(&self, diagonal: i64) -> Result<Tensor> {
        match self.ndim() {
            1 => self.diag_embed_impl("diag", diagonal, 0, 1),
            2 => self.diagonal(diagonal, 0, 1)?.clone_contiguous(),
            n => Err(TensorError::shape(
                "diag",
                format!("supports 1-D or 2-D tensors, got a {n}-D tensor"),
            )),
        }
    }

    /// `torch.diagflat(self, offset)`: the square matrix with self's
    /// elements (flattened, any shape; a 0-d tensor is one element) on
    /// diagonal `offset`, zeros elsewhere.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1i64, 2, 3, 4], &[2, 2], Device::Cpu)?;
    /// let m = x.diagflat(0)?;
    /// assert_eq!((m.shape(), m.diag(0)?.to_vec::<i64>()?), (&[4usize, 4][..], vec![1, 2, 3, 4]));
    /// assert_eq!(x.diagflat(-1)?.shape(), &[5, 5]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn diagflat(&self, offset: i64) -> Result<Tensor> {
        self.reshape(&[-1])?.diag(offset)
    }

    /// PyTorch's `torch.diag_embed`: a tensor whose `(dim1, dim2)` planes
    /// hold the last dim of `self` on their `offset`-th diagonal, zeros
    /// elsewhere. The result has one dim more than `self` (dims are counted
    /// in it; PyTorch's defaults are `0, -2, -1`), the planes are square of
    /// side `n + |offset|`, and the result is row-major.
    ///
    /// Errors (typed): a 0-d `self`, dims out of range or identical, sizes
    /// that overflow.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let e = v.diag_embed(0, -2, -1).unwrap();
    /// assert_eq!(e.shape(), &[2, 2, 2]);
    /// assert_eq!(e.to_vec::<f32>().unwrap(), vec![1., 0., 0., 2., 3., 0., 0., 4.]);
    /// ```
    pub fn diag_embed(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        self.diag_embed_impl("diag_embed", offset, dim1, dim2)
    }

    fn diag_embed_impl(
        &self,
        op: &'static str,
        offset: i64,
        dim1: i64,
        dim2: i64,
    ) -> Result<Tensor> {
        let nd = self.ndim() + 1;
        let (d1, d2) = diagonal_dims(op, dim1, dim2, nd)?;
        if self.ndim() == 0 {
            // normalize_dim accepts 0 and -1 for one dim; PyTorch's wrap
            // of a second one fails.
            return Err(TensorError::dim(
                op,
                "the input must have at least one dim (its last dim is the diagonal)",
            ));
        }
        let n = *self.shape().last().expect("at least one dim");
        let side = u64::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(offset.unsigned_abs()))
            .and_then(|s| usize::try_from(s).ok())
            .filter(|&s| s <= i64::MAX as usize)
            .ok_or_else(|| {
                TensorError::overflow(
                    op,
                    format!("a side of {n} + |{offset}| elements does not fit an i64"),
                )
            })?;
        let mut shape: Vec<usize> = self.shape()[..self.ndim() - 1].to_vec();
        let (lo, hi) = (d1.min(d2), d1.max(d2));
        shape.insert(lo, side);
        shape.insert(hi, side);
        let out = Tensor::zeros(&shape, self.dtype(), self.device())?;
        if self.numel() > 0 {
            out.diagonal(offset, d1 as i64, d2 as i64)?.copy_(self)?;
        }
        Ok(out)
    }

    /// The sum of the main diagonal of a matrix (PyTorch's `torch.trace`),
    /// as a 0-d tensor: integer inputs give i64, floats their own dtype
    /// (summed in f64, as PyTorch's CPU sums f32 in double). Bool is refused,
    /// as PyTorch has no bool trace.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.trace().unwrap().item::<i64>().unwrap(), 5);
    /// ```
    pub fn trace(&self) -> Result<Tensor> {
        if self.ndim() != 2 {
            return Err(TensorError::shape(
                "trace",
                format!("expected a matrix, got a tensor of {} dims", self.ndim()),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported("trace", DType::Bool));
        }
        let d = self.diagonal(0, 0, 1)?;
        if self.dtype().is_float() {
            d.to_dtype(DType::F64)?
                .sum(None, false)?
                .to_dtype(self.dtype())
        } else {
            d.sum(None, false)
        }
    }

    /// PyTorch's `torch.einsum`: the sum over the labels an equation does
    /// not keep of the product of the operands, each labelled dim by dim.
    ///
    /// The grammar is PyTorch's: one label (`a-z`, `A-Z`) per dim of each
    /// operand, operands separated by `,`, spaces ignored, at most one `...`
    /// per operand standing for its remaining dims (broadcast across
    /// operands, dims of size 1 stretching); an explicit output after `->`,
    /// or else the implicit one: the ellipsis dims, then the labels that
    /// occur once, in sorted order (upper case before lower case). A label
    /// repeated within an operand takes that operand's diagonal; labels of
    /// size 1 broadcast against the others.
    ///
    /// The operands are contracted left to right, as PyTorch does without
    /// `opt_einsum` (which the venv of this project's oracle lacks:
    /// `torch.backends.opt_einsum.is_available()` is false there): a label
    /// is summed out as soon as no later operand and not the output uses it,
    /// each pair through one batched matrix product of the permuted and
    /// reshaped operands (so as fast as the equivalent `bmm`, f16/bf16 and
    /// TF32 included); a pair with nothing to sum is a broadcast `mul`
    /// (with its type promotion). The pairs' products require one dtype, as
    /// `bmm` does. One operand with nothing summed returns a view, as
    /// PyTorch's (`"ij->ji"` is a transpose).
    ///
    /// Errors (typed, with PyTorch's reasons): no operand, a count of
    /// operands or of labels that does not match, a character that is not a
    /// label, a stray `.`, a label repeated in or missing from the output,
    /// sizes that do not broadcast, a repeated label of different sizes,
    /// mixed dtypes or bool in a product.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5., 6.], &[2, 3], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[1.0f32, 0., 1.], &[3], Device::Cpu).unwrap();
    /// let c = Tensor::einsum("ij,j->i", &[&a, &b]).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![4.0, 10.0]);
    /// let t = Tensor::einsum("ij->ji", &[&a]).unwrap();   // a view
    /// assert!(t.same_storage(&a) && t.shape() == [3, 2]);
    /// ```
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let ops: Vec<Tensor> = operands.iter().map(|&t| t.clone()).collect();
        if let Some(w) = ops.windows(2).find(|w| w[0].device() != w[1].device()) {
            return Err(TensorError::DeviceMismatch {
                op: "einsum",
                lhs: w[0].device(),
                rhs: w[1].device(),
            });
        }
        einsum(equation, &ops)
    }

    /// PyTorch's `torch.tensordot`: the sum of products over the dims
    /// `dims` pairs (a [`TensordotDims`]: a count `n` pairs `self`'s last
    /// `n` dims with `other`'s first `n`; two lists pair their elements).
    /// The result's dims are `self`'s free dims then `other`'s. One matrix
    /// product of the permuted operands; a contracted dim of size 1 in one
    /// operand is summed out of the other first, as PyTorch does.
    ///
    /// Errors (typed): lists of different lengths, a negative count or one
    /// larger than either rank, dims out of range or repeated, contracted
    /// sizes that differ, mixed dtypes, bool.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1.0f32, 2., 3., 4.], &[2, 2], Device::Cpu).unwrap();
    /// let c = a.tensordot(&a, 1).unwrap(); // a @ a
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
    /// let s = a.tensordot(&a, (&[0i64, 1], &[0i64, 1])).unwrap(); // sum of squares
    /// assert_eq!(s.item::<f32>().unwrap(), 30.0);
    /// ```
    pub fn tensordot<'a>(
        &self,
        other: &Tensor,
        dims: impl Into<TensordotDims<'a>>,
    ) -> Result<Tensor> {
        same_device("tensordot", self, other)?;
        tensordot(self, other, dims.into())
    }

    /// PyTorch's `torch.inner`: the sum of products over the last dims of
    /// both operands (their free dims in order); with a 0-d operand, the
    /// broadcast product `self * other` (with type promotion).
    ///
    /// Errors (typed): last dims of different sizes, mixed dtypes, bool.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1.0f32, 2., 3., 4.], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.inner(&a).unwrap().to_vec::<f32>().unwrap(), vec![5.0, 11.0, 11.0, 25.0]);
    /// ```
    pub fn inner(&self, other: &Tensor) -> Result<Tensor> {
        same_device("inner", self, other)?;
        inner(self, other)
    }

    /// PyTorch's `torch.outer` (`ger`): the `[n, m]` products of the 1-D
    /// `self` (`[n]`) and `vec2` (`[m]`), with `mul`'s type promotion.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[1.5f32, 0.5, 2.0], &[3], Device::Cpu).unwrap();
    /// let o = a.outer(&b).unwrap();
    /// assert_eq!(o.to_vec::<f32>().unwrap(), vec![1.5, 0.5, 2.0, 3.0, 1.0, 4.0]);
    /// ```
    pub fn outer(&self, vec2: &Tensor) -> Result<Tensor> {
        same_device("outer", self, vec2)?;
        outer(self, vec2)
    }

    /// PyTorch's `torch.kron`: the Kronecker product (`mul`'s type
    /// promotion). The operands' ranks are padded with leading 1s to the
    /// larger; size `i` of the result is `self`'s times `other`'s. As in
    /// PyTorch, the product is a view of `mul`'s result: operands `mul` lays
    /// out in another order than the result's (a transposed matrix) are a
    /// typed error PyTorch raises too ("view size is not compatible");
    /// pass `contiguous()` operands.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[1i64, 10], &[2], Device::Cpu).unwrap();
    /// assert_eq!(a.kron(&b).unwrap().to_vec::<i64>().unwrap(), vec![1, 10, 2, 20]);
    /// ```
    pub fn kron(&self, other: &Tensor) -> Result<Tensor> {
        same_device("kron", self, other)?;
        kron(self, other)
    }

    /// PyTorch's `torch.baddbmm`: `beta * self + alpha * (batch1 @ batch2)`
    /// for `batch1` `[B, n, m]` and `batch2` `[B, m, p]`, with `self`
    /// broadcast to `[B, n, p]`. `beta = 0` ignores `self` (its NaNs do not
    /// propagate); integer operands take the scalars truncated to integers,
    /// as PyTorch does. With `beta = alpha = 1` the product is accumulated
    /// into the copy of `self` by the GEMM (rounded once, as `addmm`).
    ///
    /// Errors (typed): operands that are not 3-D, batch or inner sizes that
    /// differ, a `self` that does not broadcast, mixed dtypes or devices,
    /// bool.
    ///
    /// ```
    /// use strata_tensor::{Device, DType, Tensor};
    /// let x = Tensor::ones(&[2, 2, 3], DType::F32, Device::Cpu).unwrap();
    /// let y = Tensor::ones(&[2, 3, 2], DType::F32, Device::Cpu).unwrap();
    /// let c = Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap();
    /// let r = c.baddbmm(&x, &y, 2.0, 0.5).unwrap();
    /// assert_eq!(r.shape(), &[2, 2, 2]);
    /// assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.5; 8]);
    /// ```
    pub fn baddbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "baddbmm";
        let (beta, alpha) = (beta.into(), alpha.into());
        same_device(OP, self, batch1)?;
        same_device(OP, self, batch2)?;
        check_batches(OP, batch1, batch2)?;
        let (bs, n, p) = (batch1.shape()[0], batch1.shape()[1], batch2.shape()[2]);
        check_broadcasts(OP, self, &[bs, n, p])?;
        check_batch_dtypes(OP, self, batch1, batch2)?;
        check_scalars(OP, self.dtype(), beta, alpha, false)?;
        if is_one(beta) && is_one(alpha) && bs * n * p > 0 {
            return self.accumulate_bmm(OP, batch1, batch2, &[bs, n, p]);
        }
        let prod = batch1.bmm(batch2)?;
        scaled_sum(self, prod, beta, alpha)
    }

    /// `self` broadcast to `shape` (`[B, n, p]`) plus `b1 @ b2`, the
    /// product accumulated into the copy by the backend's GEMM.
    fn accumulate_bmm(
        &self,
        op: &'static str,
        b1: &Tensor,
        b2: &Tensor,
        shape: &[usize],
    ) -> Result<Tensor> {
        let out = Tensor::uninit(op, shape, self.dtype(), self.device())?;
        out.copy_(&self.expand(&dims_i64(shape))?)?;
        if b1.shape()[2] == 0 {
            return Ok(out);
        }
        {
            let be = out.backend()?;
            let _g = crate::storage::AccessGuard::lock(
                Some(out.storage()),
                &[b1.storage(), b2.storage()],
            );
            be.matmul(&out.arg(), &b1.arg(), &b2.arg(), true)?;
        }
        out.bump_version();
        Ok(out)
    }

    /// PyTorch's `torch.addbmm`: `beta * self + alpha * Σ_b batch1[b] @
    /// batch2[b]` for `batch1` `[B, n, m]`, `batch2` `[B, m, p]`, `self`
    /// broadcast to `[n, p]`; computed as one `[n, B*m] @ [B*m, p]`
    /// product. `beta = 0` ignores `self`. Errors as
    /// [`Tensor::baddbmm`]'s.
    ///
    /// ```
    /// use strata_tensor::{Device, DType, Tensor};
    /// let x = Tensor::ones(&[2, 2, 3], DType::F32, Device::Cpu).unwrap();
    /// let y = Tensor::ones(&[2, 3, 2], DType::F32, Device::Cpu).unwrap();
    /// let c = Tensor::ones(&[2, 2], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(c.addbmm(&x, &y, 1, 1).unwrap().to_vec::<f32>().unwrap(), vec![7.0; 4]);
    /// ```
    pub fn addbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "addbmm";
        let (beta, alpha) = (beta.into(), alpha.into());
        same_device(OP, self, batch1)?;
        same_device(OP, self, batch2)?;
        check_batches(OP, batch1, batch2)?;
        let (bs, n, m, p) = (
            batch1.shape()[0],
            batch1.shape()[1],
            batch1.shape()[2],
            batch2.shape()[2],
        );
        check_broadcasts(OP, self, &[n, p])?;
        check_batch_dtypes(OP, self, batch1, batch2)?;
        check_scalars(OP, self.dtype(), beta, alpha, false)?;
        let k = bs.checked_mul(m).ok_or_else(|| {
            TensorError::overflow(OP, format!("{bs} batches of inner size {m} overflow"))
        })?;
        let (k, n2, p2) = (k as i64, n as i64, p as i64);
        let a = batch1.permute(&[1, 0, 2])?.reshape(&[n2, k])?;
        let b = batch2.reshape(&[k, p2])?;
        if is_one(beta) && is_one(alpha) {
            return self.addmm(&a, &b);
        }
        scaled_sum(self, a.mm(&b)?, beta, alpha)
    }

    /// PyTorch's `torch.addmv`: `beta * self + alpha * (mat @ vec)` for
    /// `mat` `[n, m]`, `vec` `[m]` and `self` broadcast to `[n]` (a 0-d or
    /// 1-D tensor). `beta = 0` ignores `self`; with `beta = alpha = 1` the
    /// sum is rounded once (as `addmm`). The result is `[n]` also for an
    /// empty `mat`, where PyTorch 2.15's CPU shortcut returns `beta * self`
    /// in self's own shape (`[]` or `[1]`, resizing its output).
    ///
    /// Errors (typed): ranks other than those, sizes that do not match,
    /// mixed dtypes or devices, bool.
    ///
    /// ```
    /// use strata_tensor::{Device, DType, Tensor};
    /// let m = Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap();
    /// let v = Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap();
    /// let c = Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(c.addmv(&m, &v, 1, 2).unwrap().to_vec::<f32>().unwrap(), vec![7.0, 7.0]);
    /// ```
    pub fn addmv(
        &self,
        mat: &Tensor,
        vec: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "addmv";
        let (beta, alpha) = (beta.into(), alpha.into());
        same_device(OP, self, mat)?;
        same_device(OP, self, vec)?;
        if mat.ndim() != 2 || vec.ndim() != 1 || self.ndim() > 1 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "vector + matrix @ vector expected, got {}, {}, {} dims",
                    self.ndim(),
                    mat.ndim(),
                    vec.ndim()
                ),
            ));
        }
        let n = mat.shape()[0];
        let self_ok = self.ndim() == 0 || self.shape()[0] == n || self.shape()[0] == 1;
        if mat.shape()[1] != vec.shape()[0] || !self_ok {
            return Err(TensorError::shape(
                OP,
                format!(
                    "size mismatch: input {:?}, mat {:?}, vec {:?}",
                    self.shape(),
                    mat.shape(),
                    vec.shape()
                ),
            ));
        }
        if self.dtype() != mat.dtype() || self.dtype() != vec.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "input tensors must have the same dtype, got {}, {} and {}",
                    self.dtype(),
                    mat.dtype(),
                    vec.dtype()
                ),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(OP, DType::Bool));
        }
        check_scalars(OP, self.dtype(), beta, alpha, false)?;
        let col = vec.unsqueeze(1)?;
        if is_one(beta) && is_one(alpha) {
            let s = self.expand(&[n as i64])?.unsqueeze(1)?;
            return s.addmm(mat, &col)?.squeeze_dims(&[1]);
        }
        scaled_sum(self, mat.mm(&col)?.squeeze_dims(&[1])?, beta, alpha)
    }

    /// PyTorch's `torch.addr`: `beta * self + alpha * outer(vec1, vec2)`
    /// with the type promotion of all three (`self` broadcast to
    /// `[n, m]`); for bool, `(beta and self) or (alpha and vec1 and vec2)`.
    /// `beta = 0` ignores `self`. As PyTorch, integer and bool results refuse
    /// a float `beta` or `alpha`.
    ///
    /// ```
    /// use strata_tensor::{Device, DType, Tensor};
    /// let v = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap();
    /// let c = Tensor::ones(&[2, 2], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(c.addr(&v, &v, 1, 2).unwrap().to_vec::<f32>().unwrap(), vec![3., 5., 5., 9.]);
    /// ```
    pub fn addr(
        &self,
        vec1: &Tensor,
        vec2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "addr";
        let (beta, alpha) = (beta.into(), alpha.into());
        same_device(OP, self, vec1)?;
        same_device(OP, self, vec2)?;
        for (name, v) in [("vec1", vec1), ("vec2", vec2)] {
            if v.ndim() != 1 {
                return Err(TensorError::shape(
                    OP,
                    format!("expected 1-D argument {name}, got {}-D", v.ndim()),
                ));
            }
        }
        let shape = [vec1.shape()[0], vec2.shape()[0]];
        check_broadcasts(OP, self, &shape)?;
        let dtype = super::elementwise::result_type(&[
            super::Operand::Tensor(self),
            super::Operand::Tensor(vec1),
            super::Operand::Tensor(vec2),
        ]);
        check_scalars(OP, dtype, beta, alpha, true)?;
        let (v1, v2) = (vec1.to_dtype(dtype)?, vec2.to_dtype(dtype)?);
        let s = self.to_dtype(dtype)?;
        if dtype == DType::Bool {
            let p = if is_zero(alpha) {
                Tensor::zeros(&shape, DType::Bool, self.device())?
            } else {
                v1.outer(&v2)?
            };
            if is_zero(beta) {
                return p.row_major_exact();
            }
            return s.expand(&dims_i64(&shape))?.logical_or_bool(&p);
        }
        // alpha * vec1 * vec2, as PyTorch's kernel multiplies them.
        let a1 = if is_one(alpha) { v1 } else { v1.mul(alpha)? };
        scaled_sum(&s, a1.outer(&v2)?, beta, Scalar::Int(1))
    }

    /// `self or other` for two bool tensors of one shape (their sum is
    /// saturated by the conversion back to bool).
    fn logical_or_bool(&self, other: &Tensor) -> Result<Tensor> {
        self.maximum(other)?.row_major_exact()
    }

    /// PyTorch's `torch.lerp`: `self + weight * (end - self)`, computed as
    /// PyTorch computes it: where `|weight| < 0.5`, `self + weight * (end -
    /// self)`, else `end - (1 - weight) * (end - self)`, each with one
    /// rounding of the multiply-add (PyTorch's CPU kernels compile to
    /// `fma(weight, end - self, self)` and `fma(weight - 1, end - self,
    /// end)`), in f32 for f16/bf16 (rounded once at the end) and f32, in f64
    /// for f64. The values agree with PyTorch's CPU bit for bit, on every
    /// device (it is composed of `sub`, `where` and `addcmul`).
    ///
    /// `end` must have `self`'s dtype, and so must a weight tensor of 1 or
    /// more dims (a 0-d one is converted, as PyTorch accepts it); all three
    /// broadcast. Float dtypes only.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[0.0f32, 10.0], &[2], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[1.0f32, 20.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(a.lerp(&b, 0.25).unwrap().to_vec::<f32>().unwrap(), vec![0.25, 12.5]);
    /// let w = Tensor::from_slice(&[0.0f32, 1.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(a.lerp(&b, &w).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 20.0]);
    /// ```
    pub fn lerp<'a>(&self, end: &Tensor, weight: impl Into<LerpWeight<'a>>) -> Result<Tensor> {
        const OP: &str = "lerp";
        let weight = weight.into();
        same_device(OP, self, end)?;
        if let LerpWeight::Tensor(w) = weight {
            same_device(OP, self, w)?;
        }
        let dtype = self.dtype();
        if end.dtype() != dtype {
            return Err(TensorError::dtype(
                OP,
                format!("expected dtype {dtype} for `end`, got {}", end.dtype()),
            ));
        }
        if let LerpWeight::Tensor(w) = weight {
            if w.ndim() > 0 && w.dtype() != dtype {
                return Err(TensorError::dtype(
                    OP,
                    format!("expected dtype {dtype} for `weight`, got {}", w.dtype()),
                ));
            }
        }
        let shape = broadcast_shapes(OP, self.shape(), end.shape())?;
        if let LerpWeight::Tensor(w) = weight {
            broadcast_shapes(OP, &shape, w.shape())?;
        }
        if !dtype.is_float() {
            return Err(TensorError::unsupported(OP, dtype));
        }
        let compute = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        if let LerpWeight::Scalar(w) = weight {
            super::checks::check_fits(OP, w, compute)?;
        }
        let s = self.to_dtype(compute)?;
        let e = end.to_dtype(compute)?;
        let d = e.sub(&s)?;
        let out = match weight {
            LerpWeight::Scalar(w) => {
                // The weight in the compute type, and `weight - 1` there.
                let w = Scalar::Float(w.to_f64()).cast_to(compute).to_f64();
                let small = w.abs() < 0.5;
                let coeff = if small {
                    w
                } else if compute == DType::F32 {
                    f64::from(w as f32 - 1.0f32)
                } else {
                    w - 1.0
                };
                let c = Tensor::scalar(coeff, compute, self.device())?;
                let base = if small { &s } else { &e };
                base.addcmul(&d, &c, 1)?
            }
            LerpWeight::Tensor(w) => {
                let w = w.to_dtype(compute)?;
                let small = w.abs()?.lt(0.5)?;
                let coeff = Tensor::where_cond(&small, &w, &w.sub(1)?)?;
                let base = Tensor::where_cond(&small, &s, &e)?;
                base.addcmul(&d, &coeff, 1)?
            }
        };
        if compute == dtype {
            Ok(out)
        } else {
            out.to_dtype(dtype)
        }
    }

    /// PyTorch's `torch.linalg.cross`: the cross product of 3-vectors along
    /// `dim` (PyTorch's default is `-1`), the operands broadcast against
    /// each other. Computed as PyTorch's CPU kernel computes each component
    /// `a1 * b2 - a2 * b1`: one fused multiply-add for f32 and f64 (its
    /// compiled `fma(a1, b2, -(a2 * b1))`), every step rounded for f16/bf16,
    /// wrapping for integers; so bit for bit with PyTorch's CPU.
    ///
    /// Errors (typed): operands of different ranks, `dim` out of range (a
    /// 0-d operand has none), a size other than 3 along `dim`, shapes that
    /// do not broadcast, mixed dtypes, bool.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1.0f32, 0.0, 0.0], &[3], Device::Cpu).unwrap();
    /// let y = Tensor::from_slice(&[0.0f32, 1.0, 0.0], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.cross(&y, -1).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0, 1.0]);
    /// ```
    pub fn cross(&self, other: &Tensor, dim: i64) -> Result<Tensor> {
        const OP: &str = "cross";
        same_device(OP, self, other)?;
        if self.ndim() != other.ndim() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "inputs must have the same number of dimensions, got {} and {}",
                    self.ndim(),
                    other.ndim()
                ),
            ));
        }
        let d = crate::shape::normalize_dim_strict(OP, dim, self.ndim())?;
        if self.shape()[d] != 3 || other.shape()[d] != 3 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "inputs dimension {dim} must have length 3, got {} and {}",
                    self.shape()[d],
                    other.shape()[d]
                ),
            ));
        }
        let shape = dims_i64(&broadcast_shapes(OP, self.shape(), other.shape())?);
        if self.dtype() != other.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "operands must share a dtype, got {} and {}",
                    self.dtype(),
                    other.dtype()
                ),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(OP, DType::Bool));
        }
        let (a, b) = (self.expand(&shape)?, other.expand(&shape)?);
        let di = d as i64;
        let ca = |i: i64| a.narrow(di, i, 1);
        let cb = |i: i64| b.narrow(di, i, 1);
        let fused = matches!(self.dtype(), DType::F32 | DType::F64);
        // a_i * b_j - a_j * b_i
        let component = |i: i64, j: i64| -> Result<Tensor> {
            let right = ca(j)?.mul(&cb(i)?)?;
            if fused {
                right.neg()?.addcmul(&ca(i)?, &cb(j)?, 1)
            } else {
                ca(i)?.mul(&cb(j)?)?.sub(&right)
            }
        };
        let (c0, c1, c2) = (component(1, 2)?, component(2, 0)?, component(0, 1)?);
        Tensor::cat(&[&c0, &c1, &c2], di)
    }
}

fn same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(TensorError::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    Ok(())
}

/// `baddbmm`'s and `addbmm`'s dtype rule: the input and both batches share
/// one dtype, which is not bool.
fn check_batch_dtypes(op: &'static str, input: &Tensor, b1: &Tensor, b2: &Tensor) -> Result<()> {
    if input.dtype() != b1.dtype() || input.dtype() != b2.dtype() {
        return Err(TensorError::dtype(
            op,
            format!(
                "input dtypes must be the same, got input {}, batch1 {}, batch2 {}",
                input.dtype(),
                b1.dtype(),
                b2.dtype()
            ),
        ));
    }
    if input.dtype() == DType::Bool {
        return Err(TensorError::unsupported(op, DType::Bool));
    }
    Ok(())
}

/// `batch1` `[B, n, m]` and `batch2` `[B, m, p]` (PyTorch's checks of
/// `baddbmm` and `addbmm`).
fn check_batches(op: &'static str, b1: &Tensor, b2: &Tensor) -> Result<()> {
    for (name, b) in [("batch1", b1), ("batch2", b2)] {
        if b.ndim() != 3 {
            return Err(TensorError::shape(
                op,
                format!("{name} must be a 3-D tensor, got {} dims", b.ndim()),
            ));
        }
    }
    if b1.shape()[0] != b2.shape()[0] {
        return Err(TensorError::shape(
            op,
            format!(
                "batch1 and batch2 must have the same number of batches, got {} and {}",
                b1.shape()[0],
                b2.shape()[0]
            ),
        ));
    }
    if b1.shape()[2] != b2.shape()[1] {
        return Err(TensorError::shape(
            op,
            format!(
                "cannot multiply batches of shapes {:?} and {:?}",
                b1.shape(),
                b2.shape()
            ),
        ));
    }
    Ok(())
}

/// `t` must broadcast to exactly `shape` (as `expand` requires).
fn check_broadcasts(op: &'static str, t: &Tensor, shape: &[usize]) -> Result<()> {
    if broadcast_shapes(op, t.shape(), shape).ok().as_deref() != Some(shape) {
        return Err(TensorError::shape(
            op,
            format!(
                "the added tensor of shape {:?} does not broadcast to the product's {shape:?}",
                t.shape()
            ),
        ));
    }
    Ok(())
}

/// `beta` and `alpha` for a result of `dtype`: `addr` refuses float scalars
/// for integer and bool results (PyTorch's words); the others truncate them
/// (see [`scale_for`]). Values must fit the dtype.
fn check_scalars(
    op: &'static str,
    dtype: DType,
    beta: Scalar,
    alpha: Scalar,
    strict: bool,
) -> Result<()> {
    for (name, s) in [("beta", beta), ("alpha", alpha)] {
        if strict && !dtype.is_float() && matches!(s, Scalar::Float(_)) {
            return Err(TensorError::value(
                op,
                format!("for integral input tensors, argument {name} must not be a floating point number"),
            ));
        }
        let s = scale_for(s, dtype);
        if dtype != DType::Bool {
            super::checks::check_fits(op, s, dtype)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The compositions, generic over `Composite`.

const LETTERS: usize = 26;
const LABELS: usize = 2 * LETTERS;

fn label_index(c: u8) -> usize {
    if c.is_ascii_uppercase() {
        (c - b'A') as usize
    } else {
        (c - b'a') as usize + LETTERS
    }
}

fn label_char(s: usize) -> char {
    if s < LETTERS {
        (b'A' + s as u8) as char
    } else {
        (b'a' + (s - LETTERS) as u8) as char
    }
}

/// One item of an operand's subscripts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sub {
    Label(usize),
    Ellipsis,
}

fn einsum_err(msg: impl Into<String>) -> TensorError {
    TensorError::value("einsum", msg)
}

/// PyTorch's einsum (left to right, no path), over any [`Composite`].
#[doc(hidden)]
pub fn einsum<T: Composite>(equation: &str, operands: &[T]) -> Result<T, T::Error> {
    if operands.is_empty() {
        return Err(einsum_err("must provide at least one operand").into());
    }
    let num_ops = operands.len();
    let bytes = equation.as_bytes();
    let arrow = equation.find("->");
    let lhs = &bytes[..arrow.unwrap_or(bytes.len())];

    // Parse the operands' subscripts.
    let mut op_subs: Vec<Vec<Sub>> = vec![Vec::new(); num_ops];
    let mut cur = 0usize;
    let mut ell_in_input = false;
    let mut i = 0usize;
    while i < lhs.len() {
        match lhs[i] {
            b' ' => {}
            b'.' => {
                if ell_in_input {
                    return Err(einsum_err(format!(
                        "found '.' for operand {cur} for which an ellipsis was already found"
                    ))
                    .into());
                }
                if !(i + 2 < lhs.len() && lhs[i + 1] == b'.' && lhs[i + 2] == b'.') {
                    return Err(einsum_err(format!(
                        "found '.' for operand {cur} that is not part of any ellipsis"
                    ))
                    .into());
                }
                i += 2;
                op_subs[cur].push(Sub::Ellipsis);
                ell_in_input = true;
            }
            b',' => {
                cur += 1;
                if cur >= num_ops {
                    return Err(einsum_err(
                        "fewer operands were provided than specified in the equation",
                    )
                    .into());
                }
                ell_in_input = false;
            }
            c if c.is_ascii_alphabetic() => op_subs[cur].push(Sub::Label(label_index(c))),
            _ => {
                return Err(einsum_err(format!(
                    "invalid subscript given at index {i} in the equation string, subscripts must be in [a-zA-Z]"
                ))
                .into())
            }
        }
        i += 1;
    }
    if cur != num_ops - 1 {
        return Err(
            einsum_err("more operands were provided than specified in the equation").into(),
        );
    }

    // Label counts and the number of dims the ellipsis covers.
    let mut label_count = [0usize; LABELS];
    let mut ell_num_dim = 0usize;
    for (k, subs) in op_subs.iter().enumerate() {
        let ndim = operands[k].shape().len();
        let mut nlabels = 0usize;
        let mut has_ell = false;
        for s in subs {
            match *s {
                Sub::Ellipsis => has_ell = true,
                Sub::Label(l) => {
                    nlabels += 1;
                    label_count[l] += 1;
                }
            }
        }
        let ok = if has_ell {
            nlabels <= ndim
        } else {
            nlabels == ndim
        };
        if !ok {
            return Err(einsum_err(if has_ell {
                format!(
                    "the number of subscripts in the equation ({nlabels}) is more than the number of dimensions ({ndim}) for operand {k}"
                )
            } else {
                format!(
                    "the number of subscripts in the equation ({nlabels}) does not match the number of dimensions ({ndim}) for operand {k} and no ellipsis was given"
                )
            })
            .into());
        }
        if has_ell {
            ell_num_dim = ell_num_dim.max(ndim - nlabels);
        }
    }

    // Where each label goes in the aligned order: output dims, then the
    // contracted ones.
    const UNSET: usize = usize::MAX;
    let mut perm_of = [UNSET; LABELS];
    let mut perm_index = 0usize;
    let mut ell_index = 0usize;
    let mut ell_in_output = false;
    match arrow {
        None => {
            perm_index = ell_num_dim;
            ell_in_output = true;
            for l in 0..LABELS {
                if label_count[l] == 1 {
                    perm_of[l] = perm_index;
                    perm_index += 1;
                }
            }
        }
        Some(pos) => {
            let rhs = &bytes[pos + 2..];
            let mut i = 0usize;
            while i < rhs.len() {
                match rhs[i] {
                    b' ' => {}
                    b'.' => {
                        if ell_in_output {
                            return Err(einsum_err(
                                "found '.' for output but an ellipsis (...) was already found",
                            )
                            .into());
                        }
                        if !(i + 2 < rhs.len() && rhs[i + 1] == b'.' && rhs[i + 2] == b'.') {
                            return Err(einsum_err(
                                "found '.' for output that is not part of any ellipsis (...)",
                            )
                            .into());
                        }
                        i += 2;
                        ell_index = perm_index;
                        perm_index += ell_num_dim;
                        ell_in_output = true;
                    }
                    c if c.is_ascii_alphabetic() => {
                        let l = label_index(c);
                        if label_count[l] == 0 || perm_of[l] != UNSET {
                            let why = if perm_of[l] != UNSET {
                                "appears more than once in the output"
                            } else {
                                "does not appear in the equation for any input operand"
                            };
                            return Err(einsum_err(format!(
                                "output subscript {} {why}",
                                c as char
                            ))
                            .into());
                        }
                        perm_of[l] = perm_index;
                        perm_index += 1;
                    }
                    _ => {
                        return Err(einsum_err(format!(
                            "invalid subscript given at index {} in the equation string, subscripts must be in [a-zA-Z]",
                            lhs.len() + 2 + i
                        ))
                        .into())
                    }
                }
                i += 1;
            }
        }
    }
    let out_num_dim = perm_index;
    if !ell_in_output {
        ell_index = perm_index;
        perm_index += ell_num_dim;
    }
    for l in 0..LABELS {
        if label_count[l] > 0 && perm_of[l] == UNSET {
            perm_of[l] = perm_index;
            perm_index += 1;
        }
    }

    // Align every operand: diagonals for repeated labels, size-1 dims for
    // missing ones, permuted to the aligned order.
    let mut label_size = [1usize; LABELS];
    let mut ell_sizes = vec![1usize; ell_num_dim];
    let mut dim_counts = vec![0usize; perm_index];
    let mut ops: std::collections::VecDeque<T> = std::collections::VecDeque::new();
    for (k, subs) in op_subs.iter().enumerate() {
        let mut op = operands[k].clone();
        let ndim_in = op.shape().len();
        let mut permutation = vec![UNSET; perm_index];
        let mut dim = 0usize;
        for s in subs {
            let shape = op.shape();
            match *s {
                Sub::Ellipsis => {
                    let covered = ndim_in - (subs.len() - 1);
                    for j in ell_num_dim - covered..ell_num_dim {
                        if shape[dim] != 1 {
                            if ell_sizes[j] != 1 && ell_sizes[j] != shape[dim] {
                                return Err(einsum_err(format!(
                                    "dimension {dim} covered by ellipsis in operand {k} has size {} which does not broadcast with previously seen ellipsis with size {} for the respective dimension",
                                    shape[dim], ell_sizes[j]
                                ))
                                .into());
                            }
                            ell_sizes[j] = shape[dim];
                            dim_counts[ell_index + j] += 1;
                        }
                        permutation[ell_index + j] = dim;
                        dim += 1;
                    }
                }
                Sub::Label(l) => {
                    let p = perm_of[l];
                    if permutation[p] == UNSET {
                        if shape[dim] != 1 {
                            if label_size[l] != 1 && label_size[l] != shape[dim] {
                                return Err(einsum_err(format!(
                                    "subscript {} has size {} for operand {k} which does not broadcast with previously seen size {}",
                                    label_char(l),
                                    shape[dim],
                                    label_size[l]
                                ))
                                .into());
                            }
                            label_size[l] = shape[dim];
                            dim_counts[p] += 1;
                        }
                        permutation[p] = dim;
                        dim += 1;
                    } else {
                        let prev = permutation[p];
                        if shape[dim] != shape[prev] {
                            return Err(einsum_err(format!(
                                "subscript {} is repeated for operand {k} but the sizes don't match, {} != {}",
                                label_char(l),
                                shape[dim],
                                shape[prev]
                            ))
                            .into());
                        }
                        // The diagonal goes last; move it back to `prev`.
                        op = op.diagonal(0, prev as i64, dim as i64)?;
                        let nd = op.shape().len();
                        let mut order: Vec<i64> = (0..prev as i64).collect();
                        order.push(nd as i64 - 1);
                        order.extend(prev as i64..nd as i64 - 1);
                        op = op.permute(&order)?;
                    }
                }
            }
        }
        for p in permutation.iter_mut() {
            if *p == UNSET {
                op = op.unsqueeze(dim as i64)?;
                *p = dim;
                dim += 1;
            }
        }
        let perm: Vec<i64> = permutation.iter().map(|&p| p as i64).collect();
        ops.push_back(op.permute(&perm)?);
    }

    // Contract left to right.
    while ops.len() > 1 {
        let mut a = ops.pop_front().expect("two operands");
        let mut b = ops.pop_front().expect("two operands");
        let (sa, sb) = (a.shape(), b.shape());
        let mut sum_dims = Vec::new();
        let mut a_sum = Vec::new();
        let mut b_sum = Vec::new();
        for d in out_num_dim..perm_index {
            if sa[d] != 1 && sb[d] != 1 {
                dim_counts[d] -= 1;
                if dim_counts[d] == 1 {
                    sum_dims.push(d);
                    dim_counts[d] = 0;
                }
            } else if dim_counts[d] == 1 {
                if sa[d] != 1 {
                    a_sum.push(d as i64);
                    dim_counts[d] = 0;
                } else if sb[d] != 1 {
                    b_sum.push(d as i64);
                    dim_counts[d] = 0;
                }
            }
        }
        if !a_sum.is_empty() {
            a = a.sum(Some(&a_sum), true)?;
        }
        if !b_sum.is_empty() {
            b = b.sum(Some(&b_sum), true)?;
        }
        ops.push_front(sumproduct_pair(&a, &b, &sum_dims)?);
    }
    let result = ops.pop_front().expect("one operand");
    if perm_index > out_num_dim {
        if num_ops > 1 {
            let shape = result.shape();
            return result.reshape(&dims_i64(&shape[..out_num_dim]));
        }
        let dims: Vec<i64> = (out_num_dim as i64..perm_index as i64).collect();
        return result.sum(Some(&dims), false);
    }
    Ok(result)
}

/// `(left * right).sum(sum_dims, keepdim = true)` of two aligned operands
/// (same rank; sizes equal or 1) through one batched matrix product:
/// `[dims in both, left only, summed] @ [both, summed, right only]`.
fn sumproduct_pair<T: Composite>(left: &T, right: &T, sum_dims: &[usize]) -> Result<T, T::Error> {
    if sum_dims.is_empty() {
        return left.mul(right);
    }
    let (mut l, mut r) = (left.clone(), right.clone());
    let nd = l.shape().len();
    let (mut lro, mut lo, mut ro) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lro_size, mut lo_size, mut ro_size, mut sum_size) = (1usize, 1usize, 1usize, 1usize);
    let mismatch = |d: usize, a: usize, b: usize| {
        TensorError::shape(
            "einsum",
            format!("non-broadcast dimensions must match: dim {d} has sizes {a} and {b}"),
        )
    };
    for d in 0..nd {
        let (ls, rs) = (l.shape()[d], r.shape()[d]);
        let (sl, sr) = (ls != 1, rs != 1);
        if sum_dims.contains(&d) {
            if sl && sr {
                if ls != rs {
                    return Err(mismatch(d, ls, rs).into());
                }
                sum_size *= ls;
            } else if sl {
                l = l.sum(Some(&[d as i64]), true)?;
            } else if sr {
                r = r.sum(Some(&[d as i64]), true)?;
            }
        } else if sl && sr {
            if ls != rs {
                return Err(mismatch(d, ls, rs).into());
            }
            lro.push(d);
            lro_size *= ls;
        } else if sl {
            lo.push(d);
            lo_size *= ls;
        } else {
            ro.push(d);
            ro_size *= rs;
        }
    }
    let (ls, rs) = (l.shape(), r.shape());
    let mut out_size: Vec<i64> = Vec::with_capacity(nd);
    out_size.extend(lro.iter().map(|&d| ls[d] as i64));
    out_size.extend(lo.iter().map(|&d| ls[d] as i64));
    out_size.extend(sum_dims.iter().map(|_| 1));
    out_size.extend(ro.iter().map(|&d| rs[d] as i64));
    let cat = |parts: &[&[usize]]| -> Vec<i64> {
        parts
            .iter()
            .flat_map(|p| p.iter().map(|&d| d as i64))
            .collect()
    };
    let lperm = cat(&[&lro, &lo, sum_dims, &ro]);
    let rperm = cat(&[&lro, sum_dims, &ro, &lo]);
    let mut operm = vec![0i64; nd];
    for (i, &d) in lro.iter().chain(&lo).chain(sum_dims).chain(&ro).enumerate() {
        operm[d] = i as i64;
    }
    let l3 = l
        .permute(&lperm)?
        .reshape(&[lro_size as i64, lo_size as i64, sum_size as i64])?;
    let r3 = r
        .permute(&rperm)?
        .reshape(&[lro_size as i64, sum_size as i64, ro_size as i64])?;
    l3.bmm(&r3)?.reshape(&out_size)?.permute(&operm)
}

/// PyTorch's tensordot over any [`Composite`].
#[doc(hidden)]
pub fn tensordot<T: Composite>(a: &T, b: &T, dims: TensordotDims) -> Result<T, T::Error> {
    const OP: &str = "tensordot";
    let (na, nb) = (a.shape().len(), b.shape().len());
    let (da, db): (Vec<i64>, Vec<i64>) = match dims {
        TensordotDims::Count(n) => {
            if n < 0 {
                return Err(
                    TensorError::value(OP, format!("expects dims >= 0, got dims={n}")).into(),
                );
            }
            if n as u64 > na.min(nb) as u64 {
                return Err(TensorError::value(
                    OP,
                    format!(
                        "expects dims <= the rank of both operands ({na} and {nb}), got dims={n}"
                    ),
                )
                .into());
            }
            let n = n as usize;
            (
                (na - n..na).map(|d| d as i64).collect(),
                (0..n).map(|d| d as i64).collect(),
            )
        }
        TensordotDims::Pairs(x, y) => (x.to_vec(), y.to_vec()),
    };
    if da.len() != db.len() {
        return Err(TensorError::shape(
            OP,
            format!("both dimension lists should have the same length, got {da:?} and {db:?}"),
        )
        .into());
    }
    if a.dtype() != b.dtype() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "both inputs should have the same dtype, got {} and {}",
                a.dtype(),
                b.dtype()
            ),
        )
        .into());
    }
    // A 0-d operand has no dim to contract (PyTorch: "Dimension specified
    // as 0 but tensor has no dimensions"), though a lone dim 0 or -1 would
    // otherwise pass for it as for a 1-D one.
    let strict = |dims: &[i64], n: usize| -> Result<Vec<usize>, TensorError> {
        match dims.first() {
            Some(&d) if n == 0 => Err(TensorError::dim(
                OP,
                format!("dimension {d} given to contract a 0-d operand, which has no dims"),
            )),
            _ => normalize_dims(OP, dims, n),
        }
    };
    let ca = strict(&da, na)?;
    let cb = strict(&db, nb)?;
    let (sa, sb) = (a.shape(), b.shape());
    let (mut t1, mut t2) = (a.clone(), b.clone());
    let mut csize = 1usize;
    // A contracted dim of size 1 in one operand is summed out of the other
    // in its own dtype (PyTorch 2.15 keeps an i32 operand i32 there).
    let dtype = a.dtype();
    let keep = |t: T| -> Result<T, T::Error> {
        if t.dtype() == dtype {
            Ok(t)
        } else {
            t.to_dtype(dtype)
        }
    };
    for (&x, &y) in ca.iter().zip(&cb) {
        let (s1, s2) = (sa[x], sb[y]);
        if s2 == 1 {
            t1 = keep(t1.sum(Some(&[x as i64]), true)?)?;
        } else if s1 == 1 {
            t2 = keep(t2.sum(Some(&[y as i64]), true)?)?;
        } else if s1 != s2 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "contracted dimensions need to match, but first has size {s1} in dim {x} and second has size {s2} in dim {y}"
                ),
            )
            .into());
        } else {
            csize *= s1;
        }
    }
    let (s1, s2) = (t1.shape(), t2.shape());
    let (mut p1, mut p2, mut rsizes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut size1, mut size2) = (1usize, 1usize);
    for d in (0..na).filter(|d| !ca.contains(d)) {
        p1.push(d as i64);
        size1 *= s1[d];
        rsizes.push(s1[d] as i64);
    }
    p1.extend(ca.iter().map(|&d| d as i64));
    p2.extend(cb.iter().map(|&d| d as i64));
    for d in (0..nb).filter(|d| !cb.contains(d)) {
        p2.push(d as i64);
        size2 *= s2[d];
        rsizes.push(s2[d] as i64);
    }
    let m1 = t1.permute(&p1)?.reshape(&[size1 as i64, csize as i64])?;
    let m2 = t2.permute(&p2)?.reshape(&[csize as i64, size2 as i64])?;
    m1.mm(&m2)?.reshape(&rsizes)
}

/// PyTorch's inner over any [`Composite`].
#[doc(hidden)]
pub fn inner<T: Composite>(a: &T, b: &T) -> Result<T, T::Error> {
    let (sa, sb) = (a.shape(), b.shape());
    if sa.is_empty() || sb.is_empty() {
        return a.mul(b);
    }
    if sa.last() != sb.last() {
        return Err(TensorError::shape(
            "inner",
            format!(
                "the last dimension must match on both input tensors, got shapes {sa:?} and {sb:?}"
            ),
        )
        .into());
    }
    tensordot(a, b, TensordotDims::Pairs(&[-1], &[-1]))
}

/// PyTorch's outer over any [`Composite`].
#[doc(hidden)]
pub fn outer<T: Composite>(a: &T, b: &T) -> Result<T, T::Error> {
    for (name, t) in [("self", a), ("vec2", b)] {
        let nd = t.shape().len();
        if nd != 1 {
            return Err(TensorError::shape(
                "outer",
                format!("expected 1-D argument {name}, got {nd}-D"),
            )
            .into());
        }
    }
    a.unsqueeze(1)?.mul(b)
}

/// PyTorch's kron over any [`Composite`].
#[doc(hidden)]
pub fn kron<T: Composite>(a: &T, b: &T) -> Result<T, T::Error> {
    let (sa, sb) = (a.shape(), b.shape());
    let nd = sa.len().max(sb.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut v = vec![1usize; nd - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(sa), pad(sb));
    let mut ra = Vec::with_capacity(2 * nd);
    let mut rb = Vec::with_capacity(2 * nd);
    let mut out = Vec::with_capacity(nd);
    for d in 0..nd {
        ra.extend([pa[d] as i64, 1]);
        rb.extend([1, pb[d] as i64]);
        let size = pa[d].checked_mul(pb[d]).filter(|&s| s <= i64::MAX as usize);
        let size = size.ok_or_else(|| {
            TensorError::overflow("kron", format!("sizes {sa:?} and {sb:?} overflow"))
        })?;
        out.push(size as i64);
    }
    // As PyTorch's `KronImpl`: the product of the two padded views, then
    // viewed (`_unsafe_view`) as the result's shape, which fails as
    // PyTorch's does where `mul` laid the product out in an order the
    // view cannot merge (a transposed operand: "view size is not
    // compatible with input tensor's size and stride").
    a.reshape(&ra)?.mul(&b.reshape(&rb)?)?.view(&out)
}
