//! Named tensors in the safetensors format (through the `safetensors` crate).
//!
//! A safetensors file is an 8-byte little-endian header length, a JSON header
//! naming each tensor's dtype, shape and byte range, and the tensors' bytes
//! (little-endian, row-major). strata writes every dtype it has (`F32`,
//! `F64`, `F16`, `BF16`, `I32`, `I64`, `U8`, `BOOL`) and reads those plus
//! the integer dtypes it can hold exactly in a wider one (`I8`, `I16`, `U16`
//! are read as i32, `U32` as i64). Other dtypes (`U64`, the 8-, 6- and 4-bit
//! floats, `C64`) are [`TensorError::DType`].
//!
//! ```
//! use strata_tensor::{interop, DType, Device, Tensor};
//! let w = Tensor::arange(0.0, 6.0, 1.0, Some(DType::BF16), Device::Cpu)?.reshape(&[2, 3])?;
//! let b = Tensor::ones(&[3], DType::F32, Device::Cpu)?;
//! let bytes = interop::safetensors_to_bytes([("w", &w), ("b", &b)])?;
//! let back = interop::safetensors_from_bytes(&bytes, Device::Cpu)?;
//! assert!(back["w"].equal(&w)? && back["b"].equal(&b)?);
//! assert_eq!(back["w"].dtype(), DType::BF16);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

use super::{format_error, read_file, Need};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::tensor::Tensor;
use ::safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, View};
use std::borrow::{Borrow, Cow};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use strata_alloc::Device;

const FORMAT: &str = "safetensors";

/// The safetensors dtype of a strata dtype.
fn to_st(dtype: DType) -> Dtype {
    match dtype {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    }
}

/// How a file's dtype is read: as a strata dtype byte for byte, or widened
/// from a narrower integer type.
enum Read {
    Exact(DType),
    /// Widened to i32 (`bytes` per element, `signed`).
    ToI32 {
        bytes: usize,
        signed: bool,
    },
    /// u32 widened to i64.
    U32ToI64,
}

fn from_st(op: &'static str, name: &str, dtype: Dtype) -> Result<Read> {
    Ok(match dtype {
        Dtype::F32 => Read::Exact(DType::F32),
        Dtype::F64 => Read::Exact(DType::F64),
        Dtype::F16 => Read::Exact(DType::F16),
        Dtype::BF16 => Read::Exact(DType::BF16),
        Dtype::I32 => Read::Exact(DType::I32),
        Dtype::I64 => Read::Exact(DType::I64),
        Dtype::U8 => Read::Exact(DType::U8),
        Dtype::BOOL => Read::Exact(DType::Bool),
        Dtype::I8 => Read::ToI32 {
            bytes: 1,
            signed: true,
        },
        Dtype::I16 => Read::ToI32 {
            bytes: 2,
            signed: true,
        },
        Dtype::U16 => Read::ToI32 {
            bytes: 2,
            signed: false,
        },
        Dtype::U32 => Read::U32ToI64,
        other => {
            return Err(TensorError::dtype(
                op,
                format!(
                    "tensor {name:?} has safetensors dtype {other:?}, which strata does not have \
                     (it reads F32, F64, F16, BF16, I64, I32, U8, BOOL, and I8, I16, U16 as i32, U32 as i64); \
                     convert it before saving (e.g. `t.float()` in PyTorch)"
                ),
            ))
        }
    })
}

/// One tensor's bytes, ready for the writer.
struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Entry {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Reads every tensor's bytes (checking the names) before anything is written.
fn entries<I, S, T>(op: &'static str, tensors: I) -> Result<Vec<(String, Entry)>>
where
    I: IntoIterator<Item = (S, T)>,
    S: AsRef<str>,
    T: Borrow<Tensor>,
{
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (name, t) in tensors {
        let name = name.as_ref();
        let t = t.borrow();
        if name == "__metadata__" {
            return Err(TensorError::value(
                op,
                "the name \"__metadata__\" is reserved by the safetensors format; rename the tensor",
            ));
        }
        if !seen.insert(name.to_string()) {
            return Err(TensorError::value(
                op,
                format!(
                    "two tensors are named {name:?}; names in a safetensors file must be unique"
                ),
            ));
        }
        // The format's readers (and the `safetensors` crate's writer)
        // multiply the sizes in order, without stopping at a 0: an empty
        // tensor such as an expanded [2^40, 2^40, 0] overflows there.
        let elems = t
            .shape()
            .iter()
            .try_fold(1usize, |a, &s| a.checked_mul(s))
            .and_then(|n| n.checked_mul(t.dtype().size() * 8));
        if elems.is_none() {
            return Err(TensorError::overflow(
                op,
                format!(
                    "tensor {name:?} of shape {:?} cannot be written as safetensors: the product of \
                     its sizes overflows in the format's size computation (though the tensor is \
                     empty); reshape it to smaller sizes first (e.g. `t.reshape(&[0])`)",
                    t.shape()
                ),
            ));
        }
        out.push((
            name.to_string(),
            Entry {
                dtype: to_st(t.dtype()),
                shape: t.shape().to_vec(),
                data: t.to_raw_bytes()?,
            },
        ));
    }
    Ok(out)
}

fn st_error(op: &'static str, path: Option<&Path>, e: SafeTensorError) -> TensorError {
    match e {
        SafeTensorError::IoError(source) => TensorError::Io {
            op,
            path: path.map(Path::to_path_buf).unwrap_or_default(),
            source,
        },
        other => format_error(op, FORMAT, other.to_string()),
    }
}

/// Serialises named tensors (any dtype, any device, any layout: each is
/// written contiguously) as a safetensors file in memory.
///
/// Names must be unique and not `__metadata__` ([`TensorError::Value`]).
pub fn safetensors_to_bytes<I, S, T>(tensors: I) -> Result<Vec<u8>>
where
    I: IntoIterator<Item = (S, T)>,
    S: AsRef<str>,
    T: Borrow<Tensor>,
{
    const OP: &str = "safetensors_to_bytes";
    let entries = entries(OP, tensors)?;
    ::safetensors::tensor::serialize(entries.iter().map(|(n, e)| (n.as_str(), e)), None)
        .map_err(|e| st_error(OP, None, e))
}

/// Saves named tensors as a safetensors file at `path` (PyTorch's
/// `safetensors.torch.save_file`): any dtype, any device, any layout (each
/// tensor is written contiguously). A map (`&HashMap<String, Tensor>`) or a
/// slice of pairs (`&[("w", &w), ("b", &b)]`) can be passed.
///
/// Every tensor is read before the file is opened, so a failure to read one
/// leaves no file behind; an I/O failure is [`TensorError::Io`].
pub fn save_safetensors<I, S, T>(path: impl AsRef<Path>, tensors: I) -> Result<()>
where
    I: IntoIterator<Item = (S, T)>,
    S: AsRef<str>,
    T: Borrow<Tensor>,
{
    const OP: &str = "save_safetensors";
    let path = path.as_ref();
    let entries = entries(OP, tensors)?;
    ::safetensors::tensor::serialize_to_file(
        entries.iter().map(|(n, e)| (n.as_str(), e)),
        None,
        path,
    )
    .map_err(|e| st_error(OP, Some(path), e))
}

/// Reads named tensors from a safetensors file in memory onto `device`.
///
/// The header is validated before anything is allocated: a corrupt header,
/// overlapping or missing byte ranges, a name given twice, a byte count
/// that does not match a shape ([`TensorError::Format`]), a shape whose size overflows
/// ([`TensorError::SizeOverflow`]) or a dtype strata does not have
/// ([`TensorError::DType`]) is an error and no tensor is returned.
pub fn safetensors_from_bytes(bytes: &[u8], device: Device) -> Result<HashMap<String, Tensor>> {
    from_bytes("safetensors_from_bytes", bytes, device)
}

/// Loads the named tensors of the safetensors file at `path` onto `device`
/// (PyTorch's `safetensors.torch.load_file(path, device=...)`). Errors as
/// [`safetensors_from_bytes`], plus [`TensorError::Io`] naming the file.
pub fn load_safetensors(path: impl AsRef<Path>, device: Device) -> Result<HashMap<String, Tensor>> {
    const OP: &str = "load_safetensors";
    let (bytes, _) = read_file(OP, path.as_ref(), need)?;
    from_bytes(OP, &bytes, device)
}

/// The first name that the header of `bytes` (already parsed by the
/// `safetensors` crate, so well formed) gives twice, if any.
fn duplicate_name(bytes: &[u8]) -> Option<String> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct FirstDuplicate;
    impl<'de> Visitor<'de> for FirstDuplicate {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a safetensors header")
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut seen = HashSet::new();
            while let Some(name) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if !seen.insert(name.clone()) {
                    return Ok(Some(name));
                }
            }
            Ok(None)
        }
    }
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..8usize.checked_add(n)?)?;
    serde_json::Deserializer::from_slice(header)
        .deserialize_map(FirstDuplicate)
        .ok()?
}

/// How much of a file `load_safetensors` reads (see `interop::read_file`):
/// the 8-byte header length, the header, then the data its byte ranges
/// cover. A header that does not parse stops the read; the parser then
/// says what is wrong.
fn need(bytes: &[u8]) -> Need {
    /// The safetensors crate's limit on the header's length.
    const MAX_HEADER: u64 = 100_000_000;
    let Some(len) = bytes.get(..8) else {
        return Need::AtLeast(8);
    };
    let mut le = [0u8; 8];
    le.copy_from_slice(len);
    let n = u64::from_le_bytes(le);
    if n > MAX_HEADER {
        return Need::Stop;
    }
    // At most 8 + 10^8: no overflow.
    let end = 8 + n as usize;
    let Some(header) = bytes.get(8..end) else {
        return Need::AtLeast(end);
    };
    match serde_json::from_slice::<::safetensors::tensor::Metadata>(header) {
        Ok(m) => Need::Total(end.saturating_add(m.data_len())),
        Err(_) => Need::Stop,
    }
}

fn from_bytes(op: &'static str, bytes: &[u8], device: Device) -> Result<HashMap<String, Tensor>> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| st_error(op, None, e))?;
    // The format disallows a name given twice; the crate's map keeps the
    // last entry, so the same bytes could read as another dtype and shape
    // than a reader keeping the first sees.
    if let Some(name) = duplicate_name(bytes) {
        return Err(format_error(
            op,
            FORMAT,
            format!("the header names tensor {name:?} twice; each name must be given once"),
        ));
    }
    // Check every tensor before allocating any.
    let mut plan = Vec::with_capacity(file.len());
    for (name, view) in file.iter() {
        let read = from_st(op, name, view.dtype())?;
        let shape = view.shape().to_vec();
        let numel = shape::check_contiguous(op, &shape)?;
        let elem = match read {
            Read::Exact(d) => d.size(),
            Read::ToI32 { bytes, .. } => bytes,
            Read::U32ToI64 => 4,
        };
        let nbytes = shape::checked_nbytes(op, &shape, numel, elem)?;
        if nbytes != view.data().len() {
            return Err(format_error(
                op,
                FORMAT,
                format!(
                    "tensor {name:?} of shape {shape:?} needs {nbytes} bytes but its byte range holds {}",
                    view.data().len()
                ),
            ));
        }
        plan.push((name.to_string(), read, shape, view.data()));
    }
    let mut out = HashMap::with_capacity(plan.len());
    for (name, read, shape, data) in plan {
        let t = match read {
            Read::Exact(d) => Tensor::from_raw_bytes(data, d, &shape, device)?,
            Read::ToI32 { bytes, signed } => {
                let elems = data.chunks_exact(bytes).map(|c| match c {
                    [b] => i32::from(*b as i8),
                    [lo, hi] if signed => i32::from(i16::from_le_bytes([*lo, *hi])),
                    [lo, hi] => i32::from(u16::from_le_bytes([*lo, *hi])),
                    _ => unreachable!("chunks of 1 or 2 bytes"),
                });
                let v = super::widened(op, data.len() / bytes, elems)?;
                Tensor::from_slice(&v, &shape, device)?
            }
            Read::U32ToI64 => {
                let elems = data
                    .chunks_exact(4)
                    .map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
                let v = super::widened(op, data.len() / 4, elems)?;
                Tensor::from_slice(&v, &shape, device)?
            }
        };
        out.insert(name, t);
    }
    Ok(out)
}
