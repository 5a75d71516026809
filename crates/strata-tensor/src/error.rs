//! Typed errors: every failure on user input is one of these, naming what was wrong.

use crate::dtype::DType;
use strata_alloc::{AllocError, Device};
use thiserror::Error;

/// Result alias for tensor operations.
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

/// Why a tensor operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TensorError {
    /// Sizes or ranks do not fit the op.
    #[error("shape mismatch in {op}: {msg}")]
    Shape {
        /// The op.
        op: &'static str,
        /// What was wrong, naming the shapes.
        msg: String,
    },
    /// Shapes do not broadcast together.
    #[error("shapes {lhs:?} and {rhs:?} do not broadcast ({op})")]
    Broadcast {
        /// The op.
        op: &'static str,
        /// One shape.
        lhs: Vec<usize>,
        /// The other.
        rhs: Vec<usize>,
    },
    /// An in-place output would have to change shape to hold the broadcast result.
    #[error("in-place {op}: output of shape {out:?} cannot hold the broadcast result of shape {result:?}")]
    InPlaceBroadcast {
        /// The op.
        op: &'static str,
        /// The in-place output's shape.
        out: Vec<usize>,
        /// The broadcast shape.
        result: Vec<usize>,
    },
    /// `view` is impossible with the current strides.
    #[error("view of shape {shape:?} with strides {strides:?} as {target:?} is impossible; use reshape (which copies)")]
    Layout {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides.
        strides: Vec<usize>,
        /// The requested shape.
        target: Vec<i64>,
    },
    /// The op is not defined for a dtype, or the dtypes disagree.
    #[error("dtype error in {op}: {msg}")]
    DType {
        /// The op.
        op: &'static str,
        /// What was wrong, naming the dtypes.
        msg: String,
    },
    /// Tensors live on different devices.
    #[error("{op}: tensors on different devices ({lhs} and {rhs})")]
    DeviceMismatch {
        /// The op.
        op: &'static str,
        /// One device.
        lhs: Device,
        /// The other.
        rhs: Device,
    },
    /// A dimension argument is out of range, repeated or absent.
    #[error("dimension error in {op}: {msg}")]
    Dim {
        /// The op.
        op: &'static str,
        /// What was wrong.
        msg: String,
    },
    /// An index or range lies outside a dimension.
    #[error("index error in {op}: {msg}")]
    Index {
        /// The op.
        op: &'static str,
        /// What was wrong.
        msg: String,
    },
    /// A view would reach outside its storage.
    #[error("view of shape {shape:?}, strides {strides:?}, offset {offset} needs {needed} elements but the storage holds {available}")]
    OutOfBounds {
        /// Requested shape.
        shape: Vec<usize>,
        /// Requested strides.
        strides: Vec<usize>,
        /// Requested offset.
        offset: usize,
        /// Elements the view would need.
        needed: usize,
        /// Elements the storage holds.
        available: usize,
    },
    /// An in-place write to a tensor whose elements alias each other or an input.
    #[error("in-place {op}: {msg}")]
    Overlap {
        /// The op.
        op: &'static str,
        /// What aliases what.
        msg: String,
    },
    /// A reduction without identity (max, min, argmax, a norm of order
    /// ±inf or p < 0) over zero elements.
    #[error(
        "{op} of a tensor of shape {shape:?}: a reduced dimension has no elements and the \
         reduction has no identity; reduce over dimensions of nonzero size"
    )]
    Empty {
        /// The op.
        op: &'static str,
        /// The input shape.
        shape: Vec<usize>,
    },
    /// An argument value is invalid.
    #[error("invalid value in {op}: {msg}")]
    Value {
        /// The op.
        op: &'static str,
        /// What was wrong.
        msg: String,
    },
    /// A size, stride, offset or byte count does not fit: the element count of
    /// a shape (or the product of its sizes that its contiguous strides need)
    /// exceeds `i64::MAX`, as PyTorch limits it, or a byte count overflows.
    /// (A `view` or `reshape` to such a shape is a [`Shape`](Self::Shape)
    /// error, as in PyTorch, unless both the input and the shape may be
    /// empty; an `as_strided` view reaching past its storage is
    /// [`OutOfBounds`](Self::OutOfBounds) first.)
    #[error("{op}: {msg}")]
    SizeOverflow {
        /// The op.
        op: &'static str,
        /// What overflowed, naming the shape.
        msg: String,
    },
    /// No backend for the device in this build or on this machine.
    #[error("no tensor backend for {device}: {reason}")]
    BackendUnavailable {
        /// The device.
        device: Device,
        /// Why.
        reason: String,
    },
    /// A device refused work: a kernel failed to compile or launch, a copy or a
    /// library call (cuBLAS, NVRTC) failed.
    #[error("{device}: {op} failed: {message}")]
    DeviceFailure {
        /// The device.
        device: Device,
        /// What was being done (`launch add_f32`, `cuMemcpyHtoDAsync`, ...).
        op: String,
        /// The driver's or library's own words.
        message: String,
    },
    /// A matrix that the op needs invertible is singular: LAPACK's (and
    /// cuSOLVER's) `getrf` found the diagonal element `index` (1-based) of
    /// its U factor exactly zero. PyTorch's `linalg.inv`, `linalg.solve` and
    /// the ops built on them raise this; `batch` is the matrix's position in
    /// the flattened batch when the input had batch dims.
    #[error("{op}: {}{}", batch_prefix(*batch), singular_msg(op, *index))]
    Singular {
        /// The op (PyTorch's name: `linalg.inv`, `torch.linalg.solve`, ...).
        op: &'static str,
        /// The matrix of the flattened batch, when the input was batched.
        batch: Option<usize>,
        /// The 1-based position of the zero diagonal element of U.
        index: usize,
    },
    /// `linalg.cholesky` of a matrix that is not positive-definite: the
    /// leading minor of order `order` is not (LAPACK's `potrf` info).
    #[error(
        "{op}: {}The factorization could not be completed because the input is not \
         positive-definite (the leading minor of order {order} is not positive-definite).",
        batch_prefix(*batch)
    )]
    NotPositiveDefinite {
        /// The op (`linalg.cholesky`).
        op: &'static str,
        /// The matrix of the flattened batch, when the input was batched.
        batch: Option<usize>,
        /// The order of the first leading minor that is not positive-definite.
        order: usize,
    },
    /// An iterative factorization (SVD, symmetric eigendecomposition) did not
    /// converge, or its input held non-finite values.
    #[error("{op}: {}{msg}", batch_prefix(*batch))]
    LinalgNoConvergence {
        /// The op (`linalg.svd`, `linalg.eigh`, ...).
        op: &'static str,
        /// The matrix of the flattened batch, when the input was batched.
        batch: Option<usize>,
        /// What failed.
        msg: String,
    },
    /// The allocator failed (out of memory, device absent...).
    #[error(transparent)]
    Alloc(#[from] AllocError),

    // ----- model files (src/interop: safetensors, .npy) -----
    /// A file could not be read or written.
    #[error("{op}: {path}: {source}")]
    Io {
        /// What was being done (`load_safetensors`, `save_npy`, ...).
        op: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file's contents are not valid in its format (a corrupt or hostile
    /// header, a byte count that does not match the shape, ...).
    #[error("{op}: not a valid {format} file: {msg}")]
    Format {
        /// What was being done (`load_safetensors`, `load_npy`, ...).
        op: &'static str,
        /// The format (`safetensors`, `npy`).
        format: &'static str,
        /// What was wrong.
        msg: String,
    },
}

/// PyTorch's `(Batch element k): ` prefix of a linear-algebra error.
fn batch_prefix(batch: Option<usize>) -> String {
    batch.map_or(String::new(), |b| format!("(Batch element {b}): "))
}

/// PyTorch's words for a singular matrix: `linalg.inv` names the zero
/// diagonal element, the solvers only that the matrix is singular.
fn singular_msg(op: &str, index: usize) -> String {
    if op.contains("solve") {
        "The solver failed because the input matrix is singular.".to_string()
    } else {
        format!(
            "The diagonal element {index} is zero, the inversion could not be completed \
             because the input matrix is singular."
        )
    }
}

impl TensorError {
    pub(crate) fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::Shape {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn dtype(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::DType {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn dim(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::Dim {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn index(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::Index {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn value(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::Value {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn overlap(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::Overlap {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn overflow(op: &'static str, msg: impl Into<String>) -> Self {
        TensorError::SizeOverflow {
            op,
            msg: msg.into(),
        }
    }
    pub(crate) fn unsupported(op: &'static str, dtype: DType) -> Self {
        TensorError::dtype(op, format!("not defined for dtype {dtype}"))
    }
}
