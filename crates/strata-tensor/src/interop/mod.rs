//! Exchange with other tools: model files and arrays.
//!
//! * [`safetensors`]: named tensors in Hugging Face's
//!   safetensors format ([`save_safetensors`], [`load_safetensors`] and the
//!   in-memory [`safetensors_to_bytes`], [`safetensors_from_bytes`]), read by
//!   PyTorch's `safetensors.torch.load_file`, and files written by it.
//! * [`npy`]: one tensor in NumPy's `.npy` format ([`save_npy`],
//!   [`load_npy`], [`npy_to_bytes`], [`npy_from_bytes`]), versions 1.0, 2.0
//!   and 3.0, C and Fortran order.
//! * With the `ndarray` feature, conversions between [`Tensor`] and
//!   `ndarray` arrays (`Tensor::from_ndarray`, `Tensor::to_ndarray`,
//!   `TryFrom` both ways). They copy (see the module's docs for why).
//! * [`Tensor::to_raw_bytes`] and [`Tensor::from_raw_bytes`]: a tensor's
//!   elements as little-endian bytes in row-major order, the layout both
//!   formats store.
//!
//! Every file is checked before anything is allocated: a corrupt or hostile
//! header, a shape whose element or byte count overflows, a byte count that
//! does not match the shape, or a dtype strata does not have is a typed error
//! ([`TensorError::Format`], [`TensorError::SizeOverflow`],
//! [`TensorError::DType`], [`TensorError::Io`]), never a panic. A file is
//! read only as far as its header says: a path without an end (`/dev/zero`,
//! a pipe left open) is refused from its first bytes, not read until the
//! host's memory runs out.
//!
//! Tensors on a GPU are copied through the backend's host transfers (staged
//! through page-locked buffers by the CUDA backend); non-contiguous tensors
//! are written in row-major order. Every tensor is read before the file is
//! opened, and an existing file is replaced only once the new one is
//! complete (written beside it and renamed over it, keeping its
//! permissions), so a failed save leaves it as it was; a symbolic link is
//! followed, and a FIFO or a device (`/dev/stdout`) is written in place.

pub mod npy;
pub mod safetensors;

#[cfg(feature = "ndarray")]
mod ndarray;

pub use self::npy::{load_npy, npy_from_bytes, npy_to_bytes, save_npy};
pub use self::safetensors::{
    load_safetensors, safetensors_from_bytes, safetensors_to_bytes, save_safetensors,
};

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;
use std::borrow::Cow;
use strata_alloc::Device;

impl Tensor {
    /// The elements as little-endian bytes in row-major order (a
    /// non-contiguous tensor is made contiguous first; bool is one byte,
    /// 0 or 1, per element). This is the layout safetensors and `.npy`
    /// store.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu)?.t()?;
    /// assert_eq!(t.to_raw_bytes()?, [1, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>> {
        const OP: &str = "to_raw_bytes";
        let c = self.contiguous()?;
        let n = shape::checked_nbytes(OP, c.shape(), c.numel(), c.dtype().size())?;
        let mut out = host_buffer(OP, n)?;
        if n > 0 {
            let start = c
                .offset()
                .checked_mul(c.dtype().size())
                .ok_or_else(|| TensorError::overflow(OP, "storage offset in bytes overflows"))?;
            let be = c.backend()?;
            let _g = AccessGuard::lock(None, &[c.storage()]);
            be.read_to_host(c.storage().mem(), start, &mut out)?;
        }
        native_to_le(&mut out, c.dtype().size());
        Ok(out)
    }

    /// A contiguous tensor of `shape` and `dtype` on `device` from its
    /// elements as little-endian bytes in row-major order (the inverse of
    /// [`Tensor::to_raw_bytes`]).
    ///
    /// `bytes` must hold exactly `numel * dtype.size()` bytes, else
    /// [`TensorError::Shape`]; a shape whose size overflows is
    /// [`TensorError::SizeOverflow`]. Bool bytes other than 0 are read as
    /// `true` (as C and NumPy do).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = Tensor::from_raw_bytes(&[0, 0, 128, 63, 0, 0, 0, 64], DType::F32, &[2], Device::Cpu)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// assert!(Tensor::from_raw_bytes(&[0; 7], DType::F32, &[2], Device::Cpu).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    #[track_caller]
    pub fn from_raw_bytes(
        bytes: &[u8],
        dtype: DType,
        shape: &[usize],
        device: Device,
    ) -> Result<Tensor> {
        const OP: &str = "from_raw_bytes";
        let numel = shape::check_contiguous(OP, shape)?;
        let nbytes = shape::checked_nbytes(OP, shape, numel, dtype.size())?;
        if bytes.len() != nbytes {
            return Err(TensorError::shape(
                OP,
                format!(
                    "{} bytes cannot hold a {dtype} tensor of shape {shape:?} ({numel} elements of {} bytes = {nbytes} bytes)",
                    bytes.len(),
                    dtype.size()
                ),
            ));
        }
        let mut data = Cow::Borrowed(bytes);
        if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
            // Rust's `bool` must be 0 or 1: normalise (non-zero is true).
            data = Cow::Owned(data.iter().map(|&b| u8::from(b != 0)).collect());
        }
        if cfg!(target_endian = "big") && dtype.size() > 1 {
            let mut owned = data.into_owned();
            swap_bytes(&mut owned, dtype.size());
            data = Cow::Owned(owned);
        }
        let t = Tensor::uninit("from_raw_bytes", shape, dtype, device)?;
        if nbytes > 0 {
            t.backend()?.write_from_host(t.storage().mem(), &data)?;
            t.remember_host_range(&data);
        }
        Ok(t)
    }
}

/// An empty vector with room for `n` elements, or a typed error when the
/// host cannot allocate it (instead of aborting the process): the sizes
/// come from files' headers. `what` names the buffer in the error.
fn reserved<T>(op: &'static str, n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        TensorError::value(
            op,
            format!(
                "cannot allocate a host buffer of {} bytes for {what}",
                n.saturating_mul(std::mem::size_of::<T>())
            ),
        )
    })?;
    Ok(v)
}

/// A zeroed host buffer of `n` bytes ([`reserved`]).
pub(crate) fn host_buffer(op: &'static str, n: usize) -> Result<Vec<u8>> {
    let mut v = reserved(op, n, "the copy")?;
    v.resize(n, 0);
    Ok(v)
}

/// The `n` elements of `elems` (a file's narrow integers widened to i32 or
/// i64) in a vector [`reserved`] for them.
pub(crate) fn widened<T>(
    op: &'static str,
    n: usize,
    elems: impl Iterator<Item = T>,
) -> Result<Vec<T>> {
    let mut v = reserved(op, n, "the widened copy")?;
    v.extend(elems);
    Ok(v)
}

/// Reverses the bytes of every `size`-byte element.
pub(crate) fn swap_bytes(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

/// Native-endian elements to little-endian (nothing to do on little-endian hosts).
fn native_to_le(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") {
        swap_bytes(bytes, size);
    }
}

/// How much of a file its format needs, judged from the bytes read so far
/// (see [`read_file`]).
pub(crate) enum Need {
    /// At least this many bytes in all before the size can be told.
    AtLeast(usize),
    /// The file's whole size, by its header.
    Total(usize),
    /// The bytes read so far are malformed: more cannot help (the format's
    /// parser then says what is wrong).
    Stop,
}

/// The smallest step a read buffer grows by when the file system gives no
/// size (a pipe, a device).
const READ_CHUNK: usize = 8 << 20;

/// Reads a file as far as its format needs, as a typed error naming the file
/// on failure: its header first (`need` says how far), then the size the
/// header gives (and, in a regular file, one byte more, so that trailing
/// data is still seen by the parser). A path without an end (`/dev/zero`, a
/// pipe whose writer stays open) or a huge file with a malformed header is
/// not read to its end: the parser refuses the prefix read. The buffer grows
/// with fallible reservations (a typed error instead of an abort when the
/// host cannot hold it). Returns the bytes read and, for a regular file, its
/// size.
pub(crate) fn read_file(
    op: &'static str,
    path: &std::path::Path,
    need: impl Fn(&[u8]) -> Need,
) -> Result<(Vec<u8>, Option<usize>)> {
    use std::io::Read;
    let io = |source| TensorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    // A regular file's size, to reserve what it holds at once; pipes and
    // devices give none.
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| usize::try_from(m.len()).ok());
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let target = match need(&buf) {
            Need::AtLeast(n) => n,
            // One byte more shows trailing data in a regular file; a pipe
            // is read only as far as the header says, as `numpy.load` reads
            // a stream (waiting for a byte more would wait on a writer that
            // keeps the pipe open).
            Need::Total(n) if size.is_some() => n.saturating_add(1),
            Need::Total(n) => n,
            Need::Stop => return Ok((buf, size)),
        };
        if buf.len() >= target {
            return Ok((buf, size));
        }
        if buf.len() == buf.capacity() {
            let want = target - buf.len();
            // What a regular file still holds (and one byte to see its
            // end) at once; otherwise (a pipe, a device, a file grown since
            // it was opened) doubling steps of at least `READ_CHUNK`.
            let more = match size {
                Some(s) if s >= buf.len() => want.min(s - buf.len() + 1),
                _ => want.min(buf.len().max(READ_CHUNK)),
            };
            buf.try_reserve_exact(more).map_err(|_| {
                TensorError::value(
                    op,
                    format!(
                        "cannot allocate {} bytes of host memory to read {}",
                        buf.len().saturating_add(more),
                        path.display()
                    ),
                )
            })?;
        }
        let start = buf.len();
        let end = buf.capacity().min(target);
        buf.resize(end, 0);
        let n = loop {
            match file.read(&mut buf[start..end]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            }
        };
        buf.truncate(start + n);
        if n == 0 {
            // The end of the file.
            return Ok((buf, size));
        }
    }
}

/// Writes a file with `write` (which gets a buffered writer), as a typed
/// error naming the file on failure, never leaving a partly written file
/// where a complete one was:
///
/// * a regular file, or a path that does not exist yet, is written to a
///   temporary file beside it that is renamed over it once complete; on an
///   error the temporary file is removed and `path` is as it was. The new
///   file keeps the permissions of the one it replaces (a new one gets the
///   usual `0o666` less the umask);
/// * a symbolic link is followed: the file it names is replaced, the link
///   kept;
/// * a path that is not a regular file (a FIFO, `/dev/null`, `/dev/stdout`)
///   is written in place, as `numpy.save` and `torch.save` write it, not
///   replaced by a regular file; a directory is [`TensorError::Io`].
///
/// (The `safetensors` crate's own writer renames a temporary file of mode
/// `0o600` over whatever `path` is: a link became a copy, a FIFO or a
/// device node a regular file.) Where no temporary file can be made beside
/// the target (a directory without write permission), the file is written
/// in place.
pub(crate) fn write_file(
    op: &'static str,
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    let io = |source| TensorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    let in_place = |write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
        write(&mut w).and_then(|()| w.flush()).map_err(io)
    };
    let mut write = Some(write);
    let mut once = |w: &mut dyn Write| match write.take() {
        Some(f) => f(w),
        None => Ok(()),
    };
    // What the path names, links followed; a dangling link is written
    // through (creating the file it names), as `File::create` does.
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(path) {
            Ok(t) => t,
            Err(_) => return in_place(&mut once),
        },
        _ => path.to_path_buf(),
    };
    let permissions = match std::fs::metadata(&target) {
        Ok(m) if m.is_file() => Some(m.permissions()),
        // A FIFO, a device, a socket (and a directory: `File::create` says
        // what it is).
        Ok(_) => return in_place(&mut once),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let Some((tmp, file)) = temp_beside(&target) else {
        return in_place(&mut once);
    };
    let written = (|| {
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        let mut w = std::io::BufWriter::new(file);
        once(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&tmp, &target)
    })();
    written.map_err(|e| {
        // The rename did not happen: only the temporary file goes.
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// A new, empty file in the directory of `target`, named after it, and
/// its path; `None` when none can be made there.
fn temp_beside(target: &std::path::Path) -> Option<(std::path::PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Short enough for a file system's 255-byte names.
    let name: String = target
        .file_name()?
        .to_string_lossy()
        .chars()
        .take(100)
        .collect();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    // A few tries: a name left by another process is skipped.
    for _ in 0..8 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.strata-tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Some((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

pub(crate) fn format_error(
    op: &'static str,
    format: &'static str,
    msg: impl Into<String>,
) -> TensorError {
    TensorError::Format {
        op,
        format,
        msg: msg.into(),
    }
}
