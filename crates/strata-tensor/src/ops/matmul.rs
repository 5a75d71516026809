//! Matrix products (`mm`, `bmm`, `matmul` with batch broadcasting) and the
//! process-wide precision of f32 products ([`set_float32_matmul_precision`]).
//!
//! Every product reaches the backend as one batched call over 3-D operands
//! `[B, m, k] @ [B, k, n]` whose strides are passed as they are: a transposed
//! matrix is a transpose flag for the GEMM, a broadcast batch is batch stride 0.
//! A copy is made only where the batch dims of an operand cannot be described
//! by one stride (say `[2, 1]` broadcast against `[1, 3]` batches), as
//! PyTorch's `reshape` does.

use crate::backend::{AddOut, SeqOrder};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::shape::broadcast_shapes;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicU8, Ordering};

/// How precisely f32 matrix products are computed on a GPU, PyTorch's
/// `torch.set_float32_matmul_precision` (and `torch.backends.cuda.matmul.allow_tf32`).
///
/// * [`Precision::Highest`] (the default): full f32 arithmetic
///   (`CUBLAS_COMPUTE_32F`), as `allow_tf32 = False`.
/// * [`Precision::High`] and [`Precision::Medium`]: the GPU may round the
///   operands to TF32 (10 explicit mantissa bits) on its tensor cores and
///   accumulate in f32 (`CUBLAS_COMPUTE_32F_FAST_TF32`), as `allow_tf32 = True`;
///   about 8x the throughput on Hopper, with a relative error near 1e-3.
///   PyTorch's CUDA matmul treats `"medium"` like `"high"`; so does strata.
///
/// f16, bf16, f64 and integer products are not affected, and neither is the
/// CPU (whose f32 products stay exact, as PyTorch's do without oneDNN's bf16
/// mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Full f32 (the default).
    #[default]
    Highest,
    /// TF32 tensor cores allowed for f32 products on GPUs.
    High,
    /// As [`Precision::High`] for strata (PyTorch's CUDA matmul does the same).
    Medium,
}

impl Precision {
    /// PyTorch's name of the setting (`"highest"`, `"high"`, `"medium"`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Highest => "highest",
            Precision::High => "high",
            Precision::Medium => "medium",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = TensorError;

    /// Parses PyTorch's names: `"highest"`, `"high"`, `"medium"`.
    fn from_str(s: &str) -> Result<Precision> {
        match s {
            "highest" => Ok(Precision::Highest),
            "high" => Ok(Precision::High),
            "medium" => Ok(Precision::Medium),
            other => Err(TensorError::value(
                "set_float32_matmul_precision",
                format!("unknown precision {other:?}; use \"highest\", \"high\" or \"medium\""),
            )),
        }
    }
}

/// The process-wide setting (0 = highest, 1 = high, 2 = medium).
static F32_MATMUL_PRECISION: AtomicU8 = AtomicU8::new(0);

/// Sets how f32 matrix products are computed on GPUs, for the whole process
/// (every thread and device), like PyTorch's
/// `torch.set_float32_matmul_precision`. Products already queued are not
/// affected.
///
/// ```
/// use strata_tensor::{float32_matmul_precision, set_float32_matmul_precision, Precision};
/// set_float32_matmul_precision(Precision::High); // allow TF32 on tensor cores
/// assert_eq!(float32_matmul_precision(), Precision::High);
/// set_float32_matmul_precision("highest".parse().unwrap());
/// assert_eq!(float32_matmul_precision(), Precision::Highest);
/// ```
pub fn set_float32_matmul_precision(p: Precision) {
    let v = match p {
        Precision::Highest => 0,
        Precision::High => 1,
        Precision::Medium => 2,
    };
    F32_MATMUL_PRECISION.store(v, Ordering::Relaxed);
}

/// The current precision of f32 matrix products (see
/// [`set_float32_matmul_precision`]).
pub fn float32_matmul_precision() -> Precision {
    match F32_MATMUL_PRECISION.load(Ordering::Relaxed) {
        0 => Precision::Highest,
        1 => Precision::High,
        _ => Precision::Medium,
    }
}

thread_local! {
    /// The precision of f32 products this thread launches inside
    /// [`with_f32_precision`], in place of the process-wide one.
    static SCOPED_PRECISION: std::cell::Cell<Option<Precision>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's f32 products computed at precision `p`
/// whatever [`set_float32_matmul_precision`] says (a convolution's products
/// follow [`crate::set_conv_allow_tf32`] instead, as PyTorch's cuDNN
/// convolutions follow `torch.backends.cudnn.allow_tf32`). Restored on
/// return, also on an early error return inside `f`.
pub(crate) fn with_f32_precision<R>(p: Precision, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Precision>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED_PRECISION.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SCOPED_PRECISION.with(|c| c.replace(Some(p))));
    f()
}

/// The precision this thread's f32 products use now: the scope's
/// ([`with_f32_precision`]) or the process-wide setting.
pub(crate) fn effective_f32_precision() -> Precision {
    SCOPED_PRECISION
        .with(|c| c.get())
        .unwrap_or_else(float32_matmul_precision)
}

impl Tensor {
    /// The operands' dtypes, checked after their shapes as PyTorch does
    /// (except `dot`, which compares the dtypes first: see `matmul`).
    fn check_matmul_dtypes(&self, op: &'static str, b: &Tensor) -> Result<()> {
        self.check_same_dtype(op, b)?;
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(op, DType::Bool));
        }
        Ok(())
    }

    /// PyTorch's `bmm` (which `matmul` reaches for batched operands it does
    /// not fold into a matrix product) computes nothing when the product has
    /// no element or its inner size `k` is 0, and checks the operands' dtypes
    /// only when it computes: such a product of mixed dtypes, or of bools, is
    /// no error but an empty (or all-zero) tensor of `b`'s dtype. `None`
    /// when the dtypes agree and are not bool (the product is computed as
    /// usual) or the product is not empty.
    fn empty_product(
        &self,
        op: &'static str,
        b: &Tensor,
        shape: &[usize],
        k: usize,
    ) -> Result<Option<Tensor>> {
        let empty = k == 0 || shape.contains(&0);
        let usual = self.dtype() == b.dtype() && self.dtype() != DType::Bool;
        if !empty || usual || self.device() != b.device() {
            return Ok(None);
        }
        let out = Tensor::uninit(op, shape, b.dtype(), b.device())?;
        if out.numel() > 0 {
            out.zero_()?;
        }
        Ok(Some(out))
    }

    /// The dtype checks of PyTorch's `mm` and `mv` (and of `matmul`, which
    /// calls them): the operands share a dtype, even for an empty product;
    /// bool is refused only where something is computed, as those return an
    /// empty product (no element, or an inner size `k` of 0: all false)
    /// before they dispatch on the dtype. `Some` is that bool product (of
    /// `shape`), `None` a product to compute.
    fn mm_dtypes(
        &self,
        op: &'static str,
        b: &Tensor,
        shape: &[usize],
        k: usize,
    ) -> Result<Option<Tensor>> {
        self.check_same_dtype(op, b)?;
        if self.dtype() != DType::Bool {
            return Ok(None);
        }
        if k != 0 && !shape.contains(&0) {
            return Err(TensorError::unsupported(op, DType::Bool));
        }
        Tensor::zeros(shape, DType::Bool, self.device()).map(Some)
    }

    fn check_same_dtype(&self, op: &'static str, b: &Tensor) -> Result<()> {
        if self.device() != b.device() {
            return Err(TensorError::DeviceMismatch {
                op,
                lhs: self.device(),
                rhs: b.device(),
            });
        }
        if self.dtype() != b.dtype() {
            return Err(TensorError::dtype(
                op,
                format!(
                    "operands must share a dtype, got {} and {}",
                    self.dtype(),
                    b.dtype()
                ),
            ));
        }
        Ok(())
    }

    /// Batched product of 3-D operands `[B, m, k] @ [B, k, n]` (checked by
    /// callers) into a fresh contiguous `[B, m, n]`. The operands may have any
    /// strides (a batch stride of 0 for a broadcast operand, transposed
    /// matrices): the backends address them as they are. f16/bf16 are
    /// multiplied in their own dtype and accumulated in f32, rounded once.
    ///
    /// `mm`: the product is PyTorch's `mm` (2-D operands, or a batch folded
    /// into the rows), not its `bmm`; on the CPU the two differ in the sign
    /// of a zero product of an inner size of 1 (see below).
    ///
    /// `kernel`: the PyTorch kernel that forms this product, whose order of
    /// additions the CPU follows for small f32/f64 products
    /// ([`sequential_fma`]).
    fn bmm_raw(
        &self,
        op: &'static str,
        b: &Tensor,
        mm: bool,
        kernel: TorchKernel,
    ) -> Result<Tensor> {
        self.bmm_into(op, b, mm, kernel, self.dtype())
    }

    /// [`Tensor::bmm_raw`] into a result of `out_dtype`: the operands' dtype,
    /// or f32 for f16/bf16 operands on a GPU ([`Tensor::matmul_wide`]).
    fn bmm_into(
        &self,
        op: &'static str,
        b: &Tensor,
        mm: bool,
        kernel: TorchKernel,
        out_dtype: DType,
    ) -> Result<Tensor> {
        let (bs, m, n) = (self.shape()[0], self.shape()[1], b.shape()[2]);
        let out = Tensor::uninit(op, &[bs, m, n], out_dtype, self.device())?;
        if out.numel() == 0 {
            // Nothing to compute, however long the batch (a [2^61, 1, 0]
            // product would otherwise walk its batch doing nothing).
            return Ok(out);
        }
        if self.shape()[2] == 1 && self.device() == crate::Device::Cpu && self.dtype().is_float() {
            // One product per element (k = 1). PyTorch 2.15's CPU kernels
            // write it as it is (-1 * 0 = -0.0) where its f32/f64 product
            // goes to BLAS gemm with at least 2 rows and 2 columns: `mm`,
            // and `bmm` of a batch of one with m * n >= 400 (smaller ones
            // take its own loop); everywhere else (other batches, matrix-
            // vector, f16/bf16) the sum starts from +0.0, so -0.0 becomes
            // +0.0. The `gemm` crate keeps the sign only for some of these
            // shapes, so k = 1 is the elementwise product here.
            let gemm = matches!(self.dtype(), DType::F32 | DType::F64)
                && n >= 2
                // `mm` counts the rows of a batch folded into them.
                && (mm && bs * m >= 2 || bs == 1 && m >= 2 && m * n >= 400);
            let p = self.mul(b)?;
            let p = if gemm { p } else { p.add(0.0)? };
            // PyTorch's `bmm` output is `at::empty([B, m, n])`.
            return p.row_major_exact();
        }
        let k = self.shape()[2];
        let order = (self.device() == crate::Device::Cpu)
            .then(|| sequential_fma(self.dtype(), kernel, (m, k, n), k_contiguous(self, b)))
            .flatten();
        {
            let be = out.backend()?;
            let _g = AccessGuard::lock(Some(out.storage()), &[self.storage(), b.storage()]);
            match order {
                Some(fma) => be.matmul_sequential(
                    &out.arg(),
                    &self.arg(),
                    &b.arg(),
                    SeqOrder {
                        fma,
                        add_out: AddOut::No,
                    },
                )?,
                None => be.matmul(&out.arg(), &self.arg(), &b.arg(), false)?,
            }
        }
        Ok(out)
    }

    /// `self + mat1 @ mat2` (PyTorch's `torch.addmm` with `beta = alpha =
    /// 1`): `mat1` `[n, m]`, `mat2` `[m, p]`, and `self` broadcastable to
    /// `[n, p]` (a bias row `[p]`, a column `[n, 1]`, a scalar or a full
    /// `[n, p]`), all of one dtype and device. The sum is formed in the
    /// product's accumulator and rounded once, as PyTorch's `addmm` (and
    /// `F.linear` with a bias) does: in bf16 or f16, `mm` then `add` rounds
    /// the product first, which loses an addend far smaller than the
    /// product (a freshly trained bias) entirely.
    ///
    /// Errors (typed): operands that are not matrices or whose inner sizes
    /// differ, a `self` that does not broadcast to `[n, p]`, mixed dtypes or
    /// devices, bool operands.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let bias = Tensor::from_slice(&[10.0f32, 20.0], &[2], Device::Cpu).unwrap();
    /// let c = bias.addmm(&a, &a).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![17.0, 30.0, 25.0, 42.0]);
    /// ```
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor) -> Result<Tensor> {
        const OP: &str = "addmm";
        // PyTorch's order: the dtypes (the added tensor against mat2, then
        // mat1 against mat2), the shapes, the broadcast of the added tensor,
        // and only then bool, which its kernels do not take.
        self.check_same_dtype(OP, mat2)?;
        mat1.check_same_dtype(OP, mat2)?;
        if mat1.ndim() != 2 || mat2.ndim() != 2 || mat1.shape()[1] != mat2.shape()[0] {
            return Err(TensorError::shape(
                OP,
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    mat1.shape(),
                    mat2.shape()
                ),
            ));
        }
        let (n, p) = (mat1.shape()[0], mat2.shape()[1]);
        if broadcast_shapes(OP, self.shape(), &[n, p]).ok().as_deref() != Some(&[n, p][..]) {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the added tensor of shape {:?} does not broadcast to the product's [{n}, {p}]",
                    self.shape()
                ),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(OP, DType::Bool));
        }
        let out = Tensor::uninit(OP, &[1, n, p], self.dtype(), self.device())?;
        out.copy_from_unchecked(&self.expand(&[1, n as i64, p as i64])?)?;
        let (a, b) = (mat1.unsqueeze(0)?, mat2.unsqueeze(0)?);
        // PyTorch's CPU kernels for f16/bf16: its `gemm_transb_` adds the
        // products to the bias (-0.0 + -0.0 products stays -0.0), the
        // others sum the products from +0.0 and add the bias after (+0.0).
        let add_after = self.device() == crate::Device::Cpu
            && matches!(self.dtype(), DType::F16 | DType::BF16)
            && !pytorch_addmm_transb(mat1, mat2);
        // A small f32/f64 product: MKL's order (see `sequential_fma`), the
        // bias added first by its column-update kernels, last by its
        // dot-product kernels (`mkl_addmm_dot`). Inner size 1 stays with
        // `matmul` (the sign of a zero there is settled by its caller's
        // tests).
        let k = mat1.shape()[1];
        // (Where MKL fuses the products, whether it starts from the bias is
        // not known: those stay with `matmul`.)
        let seq = (self.device() == crate::Device::Cpu && k >= 2)
            .then(|| {
                let kernel = TorchKernel::Mm { m: n, n: p };
                sequential_fma(self.dtype(), kernel, (n, k, p), k_contiguous(mat1, mat2))
            })
            .flatten()
            .filter(|&fma| !fma)
            .map(|fma| SeqOrder {
                fma,
                add_out: if mkl_addmm_dot(mat1, mat2) {
                    AddOut::Last
                } else {
                    AddOut::First
                },
            });
        {
            let be = out.backend()?;
            let _g = AccessGuard::lock(Some(out.storage()), &[a.storage(), b.storage()]);
            if let Some(order) = seq {
                be.matmul_sequential(&out.arg(), &a.arg(), &b.arg(), order)?;
            } else if add_after {
                be.matmul_add_after(&out.arg(), &a.arg(), &b.arg())?;
            } else {
                be.matmul(&out.arg(), &a.arg(), &b.arg(), true)?;
            }
        }
        out.squeeze_dims(&[0])
    }

    /// Matrix product of two 2-D tensors of one dtype. Bools only for an
    /// empty product (no element, or an inner size of 0: all false), as
    /// PyTorch's `mm`, whose kernels take no bools.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let c = a.mm(&a.t().unwrap()).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![5.0, 11.0, 11.0, 25.0]);
    /// ```
    pub fn mm(&self, b: &Tensor) -> Result<Tensor> {
        if self.ndim() != 2 || b.ndim() != 2 || self.shape()[1] != b.shape()[0] {
            return Err(TensorError::shape(
                "mm",
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            ));
        }
        let (m, k, n) = (self.shape()[0], self.shape()[1], b.shape()[1]);
        if let Some(out) = self.mm_dtypes("mm", b, &[m, n], k)? {
            return Ok(out);
        }
        let r =
            self.unsqueeze(0)?
                .bmm_raw("mm", &b.unsqueeze(0)?, true, TorchKernel::Mm { m, n })?;
        r.squeeze_dims(&[0])
    }

    /// Batched matrix product of two 3-D tensors with equal batch sizes.
    pub fn bmm(&self, b: &Tensor) -> Result<Tensor> {
        if self.ndim() != 3
            || b.ndim() != 3
            || self.shape()[0] != b.shape()[0]
            || self.shape()[2] != b.shape()[1]
        {
            return Err(TensorError::shape(
                "bmm",
                format!(
                    "cannot batch-multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            ));
        }
        let shape = [self.shape()[0], self.shape()[1], b.shape()[2]];
        if let Some(out) = self.empty_product("bmm", b, &shape, self.shape()[2])? {
            return Ok(out);
        }
        self.check_matmul_dtypes("bmm", b)?;
        self.bmm_raw("bmm", b, false, TorchKernel::Bmm)
    }

    /// `torch.matmul`: dot product, matrix-vector, matrix, or batched with
    /// broadcast batch dims (1-D operands get a dim added, then removed).
    pub fn matmul(&self, b: &Tensor) -> Result<Tensor> {
        let (na, nb) = (self.ndim(), b.ndim());
        let err = || {
            TensorError::shape(
                "matmul",
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            )
        };
        if na == 1 && nb == 1 {
            // PyTorch's dot compares the dtypes, then the sizes, and takes
            // no bools, even empty ones.
            self.check_same_dtype("matmul", b)?;
            if self.shape() != b.shape() {
                return Err(err());
            }
            if self.dtype() == DType::Bool {
                return Err(TensorError::unsupported("matmul", DType::Bool));
            }
        }
        if na == 0 || nb == 0 {
            return Err(err());
        }
        let a2 = if na == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b2 = if nb == 1 { b.unsqueeze(1)? } else { b.clone() };
        let (m, k) = (a2.shape()[a2.ndim() - 2], a2.shape()[a2.ndim() - 1]);
        let (k2, n) = (b2.shape()[b2.ndim() - 2], b2.shape()[b2.ndim() - 1]);
        // PyTorch broadcasts the batch dims before it compares the inner sizes.
        let batch = broadcast_shapes(
            "matmul",
            &a2.shape()[..a2.ndim() - 2],
            &b2.shape()[..b2.ndim() - 2],
        )?;
        if k != k2 {
            return Err(err());
        }
        // The result's shape: the batch, then the rows of a 2-D-or-more `a`
        // and the columns of a 2-D-or-more `b`.
        let mut shape = batch.clone();
        if na > 1 {
            shape.push(m);
        }
        if nb > 1 {
            shape.push(n);
        }
        if (na > 2 || nb > 2) && !pytorch_folds(self, b) {
            // PyTorch's batched path: its bmm's rule for empty products.
            if let Some(out) = self.empty_product("matmul", b, &shape, k)? {
                return Ok(out);
            }
        }
        if let Some(out) = self.mm_dtypes("matmul", b, &shape, k)? {
            return Ok(out);
        }
        // Saturating: an empty batch may have other dims whose product
        // overflows; the output's own size check rejects real overflow.
        let bsz = crate::shape::numel(&batch);
        // The PyTorch kernel whose order of additions strata follows:
        // `dot`, `mm`/`mv` (with a batch folded into the rows of `a`, or of
        // `b` transposed), else `bmm`.
        let torch_kernel = if na == 1 && nb == 1 {
            TorchKernel::Dot
        } else if na <= 2 && nb <= 2 {
            TorchKernel::Mm { m, n }
        } else if pytorch_folds(self, b) {
            if na >= nb {
                TorchKernel::Mm {
                    m: bsz.saturating_mul(m),
                    n,
                }
            } else {
                TorchKernel::Mm {
                    m: bsz.saturating_mul(n),
                    n: m,
                }
            }
        } else {
            TorchKernel::Bmm
        };
        // `[..., m, k] @ [k, n]`: PyTorch folds the batch into the rows, one
        // `[B*m, k] @ [k, n]` product (where the batch and row dims collapse
        // to one stride; otherwise b is broadcast with batch stride 0).
        let folded = if nb <= 2 && a2.ndim() > 2 {
            collapse(&a2, 0..a2.ndim() - 1).map(|(rows, rs)| {
                let l = a2.layout();
                a2.with_layout(Layout {
                    shape: vec![1, rows, k],
                    strides: vec![0, rs, l.strides[a2.ndim() - 1]],
                    offset: l.offset,
                })
            })
        } else {
            None
        };
        let out = match folded {
            Some(af) => af.bmm_raw("matmul", &b2.unsqueeze(0)?, true, torch_kernel)?,
            // PyTorch's `mm` (or `mv`) wherever `b` is a matrix or a
            // vector (a batch of `a` folded into the rows), else `bmm`.
            None => as_batch3(&a2, &batch, bsz, m, k)?.bmm_raw(
                "matmul",
                &as_batch3(&b2, &batch, bsz, k, n)?,
                nb <= 2,
                torch_kernel,
            )?,
        };
        let shape: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
        out.view(&shape)
    }
}

impl Tensor {
    /// The product of two f16 or bf16 operands of at least two dims each
    /// (batch dims broadcast as [`Tensor::matmul`]'s) left in f32: the
    /// products accumulated in f32 and not rounded, for a caller that adds
    /// more to the sum before rounding it once (a convolution's bias, the
    /// batch sum of its weight gradient). On a GPU one cuBLAS call on tensor
    /// cores writes f32; elsewhere the operands are widened to f32 first.
    /// Other dtypes multiply as [`Tensor::matmul`] does.
    pub(crate) fn matmul_wide(&self, b: &Tensor) -> Result<Tensor> {
        let half = matches!(self.dtype(), DType::F16 | DType::BF16);
        if !half || self.device() == crate::Device::Cpu || self.ndim() < 2 || b.ndim() < 2 {
            let f = |t: &Tensor| {
                if half {
                    t.to_dtype(DType::F32)
                } else {
                    Ok(t.clone())
                }
            };
            return f(self)?.matmul(&f(b)?);
        }
        self.check_same_dtype("matmul", b)?;
        let (na, nb) = (self.ndim(), b.ndim());
        let (m, k) = (self.shape()[na - 2], self.shape()[na - 1]);
        let (k2, n) = (b.shape()[nb - 2], b.shape()[nb - 1]);
        let batch = broadcast_shapes("matmul", &self.shape()[..na - 2], &b.shape()[..nb - 2])?;
        if k != k2 {
            return Err(TensorError::shape(
                "matmul",
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            ));
        }
        let bsz = crate::shape::checked_numel("matmul", &batch)?;
        let out = as_batch3(self, &batch, bsz, m, k)?.bmm_into(
            "matmul",
            &as_batch3(b, &batch, bsz, k, n)?,
            false,
            TorchKernel::Bmm,
            DType::F32,
        )?;
        let mut shape: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
        shape.extend([m as i64, n as i64]);
        out.view(&shape)
    }
}

/// The PyTorch 2.15 CPU kernel that forms a float product (for its order
/// of additions; see [`sequential_fma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TorchKernel {
    /// `dot` of two vectors (MKL's).
    Dot,
    /// `mm`, `mv` or `addmm` of an `m x k` by a `k x n` matrix (MKL's
    /// `gemm`/`gemv`), after PyTorch's fold of a batch into the rows (of `a`,
    /// or of `b` transposed: then `m` and `n` are the transposed product's).
    Mm { m: usize, n: usize },
    /// `bmm` (batched `matmul` that does not fold): PyTorch's own loop for
    /// small matrices, MKL's `gemm` per matrix otherwise.
    Bmm,
}

/// Whether PyTorch 2.15's CPU (the AVX2 build of the PyPI wheel, one
/// thread) sums each result element of this f32/f64 product with inner size
/// `k` over `k` in order (`Some`): with each product rounded first
/// (`Some(false)`) or fused into the sum (`Some(true)`). `None`: another
/// order, left to the `gemm` crate. Found by comparing PyTorch's products of
/// random matrices in every layout with those sums, element by element
/// (session 57):
///
/// * `bmm` with `m * n * k < 400`: PyTorch's own loop (`baddbmm_cpu_kernel`,
///   `acc += a * b` from 0), any `k`; larger, MKL's `gemm` per matrix (the
///   rules of `mm` below).
/// * `mm`/`mv` (and `addmm`) with `m < 4` or `n < 12` (`m`, `n` PyTorch's)
///   and `k <= 3`: MKL's small-matrix kernels round each product and add in
///   order, whatever the layouts (1000 x 3 @ 3 x 8 and 2 x 3 @ 3 x 1000
///   too); for `4 <= k <= 7` too where `dot` is `Some(false)` (not both
///   operands run along `k` with unit stride: [`k_contiguous`]). Where both
///   do, MKL's kernels sum along `k` in vector lanes (and peel by the
///   operands' alignment), and from `k = 8` on some other layouts too:
///   strata does not follow those.
/// * f32 `mm` with `m >= 4`, `n >= 12` and `k <= 192`: MKL's kernels fuse
///   each product into the sum, in every layout. The `gemm` crate does too
///   except for `a @ b.t()` up to about 16 x 16 x 16, where it sums along
///   `k` in lanes, so strata's loop takes these up to 2^16 multiply-adds.
///   Past `k = 192` MKL sums blocks of `k` separately; f64 there is another
///   order.
/// * `dot` of f32 vectors of at most 3 elements, or f64 of at most 2, in
///   order with rounded products.
///
/// (`k = 1` and `k = 0` are settled by the callers.)
fn sequential_fma(
    dtype: DType,
    kernel: TorchKernel,
    (m, k, n): (usize, usize, usize),
    dot: Option<bool>,
) -> Option<bool> {
    if !matches!(dtype, DType::F32 | DType::F64) || k < 2 {
        return None;
    }
    match kernel {
        TorchKernel::Bmm if m.saturating_mul(n).saturating_mul(k) < 400 => Some(false),
        // Larger: MKL's `gemm` per matrix (as `mm`).
        TorchKernel::Bmm => sequential_fma(dtype, TorchKernel::Mm { m, n }, (m, k, n), dot),
        TorchKernel::Dot => (k <= 2 || k <= 3 && dtype == DType::F32).then_some(false),
        TorchKernel::Mm { m, n } => {
            if m < 4 || n < 12 {
                (k <= 3 || k <= 7 && dot == Some(false)).then_some(false)
            } else {
                // Up to 2^16 multiply-adds: past that the crate's kernels
                // fuse in order too (checked to 48 x 48 x 48 and
                // 100 x 30 x 100 in every layout) and are faster.
                let small = m.saturating_mul(n).saturating_mul(k) <= 1 << 16;
                (dtype == DType::F32 && k <= 192 && small).then_some(true)
            }
        }
    }
}

/// Whether both operands of `a` `[.., m, k]` @ `b` `[.., k, n]` run along
/// `k` with unit stride (a vector's one row or column counts), the layout
/// MKL's dot-product kernels take; `None` when one has no unit stride in
/// its last two dims (PyTorch copies it first).
fn k_contiguous(a: &Tensor, b: &Tensor) -> Option<bool> {
    let (sa, sb) = (a.strides(), b.strides());
    let (da, db) = (a.ndim(), b.ndim());
    let (m, k, n) = (a.shape()[da - 2], a.shape()[da - 1], b.shape()[db - 1]);
    let unit = |s: &[usize], d: usize, rows: usize, cols: usize| {
        (rows <= 1 || cols <= 1) || s[d - 1] == 1 || s[d - 2] == 1
    };
    if !unit(sa, da, m, k) || !unit(sb, db, k, n) {
        return None;
    }
    Some((m == 1 || k == 1 || sa[da - 1] == 1) && (n == 1 || k == 1 || sb[db - 2] == 1))
}

/// Whether MKL's `addmm` (f32/f64, PyTorch 2.15's CPU) of `mat1` `[m, k]`
/// and `mat2` `[k, n]` takes a dot-product kernel, which sums the products
/// from +0.0 and adds the bias after, rather than a column-update kernel,
/// which starts from the bias: by PyTorch's `addmm_impl_cpu_` stride tests
/// (see [`pytorch_addmm_transb`]), the BLAS `A` operand (`mat2` when
/// `n > 1`, where PyTorch swaps the operands; else `mat1`) is passed
/// transposed (found by comparing PyTorch's `addmm` with both sums in every
/// layout, session 57).
fn mkl_addmm_dot(mat1: &Tensor, mat2: &Tensor) -> bool {
    let (m, k, n) = (mat1.shape()[0], mat1.shape()[1], mat2.shape()[1]);
    if n != 1 {
        // mat2 as BLAS's A: row-major (unit column stride, a row stride of at
        // least n) is "not transposed"; else column-major is "transposed";
        // else PyTorch copies it untransposed.
        let s = mat2.strides();
        !(s[1] == 1 && s[0] >= n.max(1)) && s[0] == 1 && s[1] >= k.max(1)
    } else {
        // mat1 as BLAS's A: column-major is "not transposed"; anything else
        // is passed (or copied) transposed.
        let s = mat1.strides();
        !(s[0] == 1 && s[1] >= m.max(1))
    }
}

/// Whether PyTorch 2.15's CPU `addmm` of `mat1` `[m, k]` and `mat2`
/// `[k, n]` into a fresh contiguous `[m, n]` calls its BLAS-style `gemm`
/// with `transa = N, transb = T` (its `gemm_transb_` kernel), by the stride
/// tests of its `addmm_impl_cpu_`: the result is column-major `[n, m]` when
/// `n > 1` (the operands swap), each operand is "not transposed" when its
/// column-major view has unit stride and a leading dimension large enough,
/// "transposed" when its transpose does, and otherwise copied (transposed
/// exactly when the result is not swapped).
fn pytorch_addmm_transb(mat1: &Tensor, mat2: &Tensor) -> bool {
    let (m, k, n) = (mat1.shape()[0], mat1.shape()[1], mat2.shape()[1]);
    let transpose_c = n != 1;
    // PyTorch's m1, m2 and sizes after its swap.
    let (m1, m2, rows, cols) = if transpose_c {
        (mat2.strides(), mat1.strides(), n, m)
    } else {
        (mat1.strides(), mat2.strides(), m, n)
    };
    let (r, c) = if transpose_c { (1, 0) } else { (0, 1) };
    let transposed = |s: &[usize], ld_plain: usize, ld_t: usize| {
        if s[r] == 1 && s[c] >= ld_plain.max(1) {
            false
        } else if s[c] == 1 && s[r] >= ld_t.max(1) {
            true
        } else {
            !transpose_c
        }
    };
    let transpose_a = transposed(m1, rows, k);
    let transpose_b = transposed(m2, k, cols);
    !transpose_a && transpose_b
}

/// Whether PyTorch's `matmul` folds the batch of the operand with more dims
/// (`a`, or `b` transposed) into the rows of one matrix product (`mm` or
/// `mv`) instead of calling `bmm` (its `should_fold`, for operands that need
/// no gradient): when that operand has 3 or more dims and the other 1 or 2,
/// `a` is not a matrix, and the operand is empty or its dims but the last
/// collapse into one without a copy (`view(-1, size(-1))` succeeds: dims of
/// size 1 are left out, whatever their strides, as PyTorch 2.15 leaves them
/// out; `[1, 2, 2]` with strides `[8, 2, 1]`, a step slice of a `[2, 2, 2]`,
/// folds).
fn pytorch_folds(a: &Tensor, b: &Tensor) -> bool {
    let a_larger = a.ndim() >= b.ndim();
    let (big, small_ndim) = if a_larger {
        (a.layout().clone(), b.ndim())
    } else {
        let mut l = b.layout().clone();
        let d = l.shape.len();
        l.shape.swap(d - 1, d - 2);
        l.strides.swap(d - 1, d - 2);
        (l, a.ndim())
    };
    let d = big.shape.len();
    if d < 3 || !(small_ndim == 1 || small_ndim == 2) || a.ndim() == 2 {
        return false;
    }
    if big.shape.contains(&0) {
        return true;
    }
    // Each kept dim's stride is the next kept dim's stride times its size.
    let kept: Vec<(usize, usize)> = (0..d - 1)
        .filter(|&i| big.shape[i] != 1)
        .map(|i| (big.shape[i], big.strides[i]))
        .collect();
    kept.windows(2)
        .all(|w| w[1].1.checked_mul(w[1].0) == Some(w[0].1))
}

/// The `(size, stride)` of dims `dims` of `t` seen as one dim, when they can
/// be (each dim's stride is the next one's stride times its size; size-1
/// dims are ignored); `None` otherwise.
fn collapse(t: &Tensor, dims: std::ops::Range<usize>) -> Option<(usize, usize)> {
    let (shape, strides) = (t.shape(), t.strides());
    if dims.clone().any(|d| shape[d] == 0) {
        // An empty range collapses whatever its strides ([2^62, 0] with
        // strides [2, 2]: PyTorch folds it into 0 rows).
        return Some((0, 1));
    }
    let mut merged: Option<(usize, usize)> = None;
    let mut count = 1usize;
    for d in dims.rev() {
        if shape[d] == 1 {
            continue;
        }
        count = count.checked_mul(shape[d])?;
        merged = match merged {
            None => Some((shape[d], strides[d])),
            Some((n, s)) if strides[d] == s.checked_mul(n)? => Some((n * shape[d], s)),
            Some(_) => return None,
        };
    }
    Some(merged.map_or((count, 0), |(_, s)| (count, s)))
}

/// `t` (`[batch_t..., r, c]`) broadcast to `[batch..., r, c]` and seen as
/// `[bsz, r, c]`: a view when the broadcast batch dims collapse to one stride
/// (0 for an operand broadcast over the whole batch), else a contiguous copy.
fn as_batch3(t: &Tensor, batch: &[usize], bsz: usize, r: usize, c: usize) -> Result<Tensor> {
    let mut full: Vec<usize> = batch.to_vec();
    full.extend([r, c]);
    let e = t.broadcast_to(&full)?;
    let nb = batch.len();
    match collapse(&e, 0..nb) {
        Some((_, s)) => {
            let l = e.layout();
            Ok(e.with_layout(Layout {
                shape: vec![bsz, r, c],
                strides: vec![s, l.strides[nb], l.strides[nb + 1]],
                offset: l.offset,
            }))
        }
        None => e.reshape(&[bsz as i64, r as i64, c as i64]),
    }
}
