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

use super::{format_error, read_file, write_file, Need};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::tensor::Tensor;
use ::safetensors::tensor::{Dtype, Metadata, SafeTensorError, SafeTensors, TensorInfo};
use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use strata_alloc::Device;

const FORMAT: &str = "safetensors";

/// The `safetensors` crate's limit on the header's length, in bytes.
const MAX_HEADER: usize = 100_000_000;

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

/// The first bytes of the file of `entries` (the 8-byte header length and
/// the JSON header, padded with spaces to a multiple of 8 bytes), after
/// sorting `entries` into the order their bytes follow: exactly what the
/// `safetensors` crate's `serialize` (and so PyTorch's `save_file`) writes,
/// by dtype (the crate's order, widest alignment first) and then by name.
fn header(op: &'static str, entries: &mut [(String, Entry)]) -> Result<Vec<u8>> {
    entries.sort_by(|(ln, l), (rn, r)| r.dtype.cmp(&l.dtype).then(ln.cmp(rn)));
    let mut infos = Vec::with_capacity(entries.len());
    let mut offset = 0usize;
    for (name, e) in entries.iter() {
        // The bytes are in memory: their sum cannot overflow.
        let end = offset + e.data.len();
        infos.push((
            name.clone(),
            TensorInfo {
                dtype: e.dtype,
                shape: e.shape.clone(),
                data_offsets: (offset, end),
            },
        ));
        offset = end;
    }
    let bad =
        |e: String| TensorError::value(op, format!("cannot write the safetensors header: {e}"));
    let metadata = Metadata::new(None, infos).map_err(|e| bad(e.to_string()))?;
    let mut json = serde_json::to_vec(&metadata).map_err(|e| bad(e.to_string()))?;
    let n = json.len().next_multiple_of(8);
    if n > MAX_HEADER {
        return Err(TensorError::value(
            op,
            format!(
                "the safetensors header of these {} tensors takes {n} bytes, more than the \
                 format's limit of {MAX_HEADER}: too many tensors or names too long; save them \
                 in several files",
                entries.len()
            ),
        ));
    }
    json.resize(n, b' ');
    let mut out = Vec::with_capacity(8 + n);
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(&json);
    Ok(out)
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
    let mut entries = entries(OP, tensors)?;
    let header = header(OP, &mut entries)?;
    let total = entries
        .iter()
        .fold(header.len(), |n, (_, e)| n.saturating_add(e.data.len()));
    let mut out = super::reserved(OP, total, "the file")?;
    out.extend_from_slice(&header);
    for (_, e) in &entries {
        out.extend_from_slice(&e.data);
    }
    Ok(out)
}

/// Saves named tensors as a safetensors file at `path` (PyTorch's
/// `safetensors.torch.save_file`, byte for byte): any dtype, any device,
/// any layout (each tensor is written contiguously). A map
/// (`&HashMap<String, Tensor>`) or a slice of pairs
/// (`&[("w", &w), ("b", &b)]`) can be passed.
///
/// Every tensor is read before the file is opened, so a failure to read one
/// leaves no file behind, and an existing file is replaced only once the
/// new one is complete (written beside it and renamed over it, keeping its
/// permissions; a new file gets the usual `0o666` less the umask). A
/// symbolic link is followed (the file it names is replaced), and a path
/// that is not a regular file (a FIFO, `/dev/stdout`) is written in place.
/// An I/O failure is [`TensorError::Io`].
pub fn save_safetensors<I, S, T>(path: impl AsRef<Path>, tensors: I) -> Result<()>
where
    I: IntoIterator<Item = (S, T)>,
    S: AsRef<str>,
    T: Borrow<Tensor>,
{
    const OP: &str = "save_safetensors";
    let mut entries = entries(OP, tensors)?;
    let header = header(OP, &mut entries)?;
    write_file(OP, path.as_ref(), |w| {
        w.write_all(&header)?;
        for (_, e) in &entries {
            w.write_all(&e.data)?;
        }
        Ok(())
    })
}

/// Reads named tensors from a safetensors file in memory onto `device`.
///
/// The header is validated before anything is allocated: a corrupt header,
/// overlapping or missing byte ranges, a name given twice, a byte count
/// that does not match a shape, a shape whose element or bit count
/// overflows the format's own (usize) size arithmetic
/// ([`TensorError::Format`], naming the tensor, its dtype, shape and byte
/// range), a shape strata cannot hold (sizes or strides past i64::MAX:
/// [`TensorError::SizeOverflow`]) or a dtype strata does not have
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
    let Some(len) = bytes.get(..8) else {
        return Need::AtLeast(8);
    };
    let mut le = [0u8; 8];
    le.copy_from_slice(len);
    let n = u64::from_le_bytes(le);
    if n > MAX_HEADER as u64 {
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

/// The error for a file the `safetensors` crate refuses: what is wrong
/// (naming the tensor, its shape, dtype and byte range where one is at
/// fault; the crate's own messages name none of them) and what to do.
fn read_error(op: &'static str, bytes: &[u8], e: SafeTensorError) -> TensorError {
    use SafeTensorError as E;
    let n = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes);
    let msg = match e {
        E::HeaderTooSmall => format!(
            "the file has {} bytes, fewer than the 8-byte header length a safetensors file \
             starts with: it is empty or cut short; save it again",
            bytes.len()
        ),
        E::HeaderTooLarge => format!(
            "the first 8 bytes give a header length of {n} bytes, more than the format's \
             limit of {MAX_HEADER}: this is not a safetensors file, or its start is corrupt"
        ),
        E::InvalidHeaderLength => format!(
            "the first 8 bytes give a header length of {n} bytes but only {} bytes follow \
             them: the file is cut short or not a safetensors file",
            bytes.len().saturating_sub(8)
        ),
        E::InvalidHeader(u) => format!("the header is not UTF-8 text ({u}): the file is corrupt"),
        E::InvalidHeaderDeserialization(j) => format!(
            "the header is not a safetensors header ({j}); it must be a JSON object mapping \
             each name to {{\"dtype\": \"F32\", \"shape\": [...], \"data_offsets\": \
             [begin, end]}}, with an optional \"__metadata__\" map of strings"
        ),
        other => explain_ranges(bytes, n).unwrap_or_else(|| other.to_string()),
    };
    format_error(op, FORMAT, msg)
}

/// What is wrong with the byte ranges of a header the `safetensors` crate
/// parsed but refused (checked as the crate checks them, in the order of
/// their offsets).
fn explain_ranges(bytes: &[u8], n: u64) -> Option<String> {
    let header = bytes.get(8..usize::try_from(n).ok()?.checked_add(8)?)?;
    let map: HashMap<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    let mut infos: Vec<(String, TensorInfo)> = map
        .into_iter()
        .filter(|(k, _)| k != "__metadata__")
        .map(|(k, v)| Some((k, serde_json::from_value::<TensorInfo>(v).ok()?)))
        .collect::<Option<_>>()?;
    infos.sort_by(|(ln, l), (rn, r)| l.data_offsets.cmp(&r.data_offsets).then(ln.cmp(rn)));
    let mut end = 0usize;
    for (name, t) in &infos {
        let (b, e) = t.data_offsets;
        let (dtype, shape) = (t.dtype, &t.shape);
        if b != end || e < b {
            return Some(format!(
                "tensor {name:?} has data_offsets [{b}, {e}], but the byte ranges must follow \
                 one another from 0 without gaps or overlaps, each ending after it begins \
                 (sorted by offset, the one before it ends at {end}): the header is corrupt"
            ));
        }
        end = e;
        let bits = shape
            .iter()
            .try_fold(1usize, |a, &s| a.checked_mul(s))
            .and_then(|k| k.checked_mul(dtype.bitsize()));
        let Some(bits) = bits else {
            return Some(format!(
                "tensor {name:?} of dtype {dtype:?} and shape {shape:?}: its element or bit \
                 count overflows the format's size arithmetic: the header is corrupt"
            ));
        };
        if bits % 8 != 0 {
            return Some(format!(
                "tensor {name:?} of dtype {dtype:?} and shape {shape:?} does not fill whole \
                 bytes ({bits} bits): the header is corrupt"
            ));
        }
        if e - b != bits / 8 {
            return Some(format!(
                "tensor {name:?} of dtype {dtype:?} and shape {shape:?} takes {} bytes but its \
                 data_offsets [{b}, {e}] hold {}: the header is corrupt",
                bits / 8,
                e - b
            ));
        }
    }
    let held = bytes.len() - header.len() - 8;
    (held != end).then(|| {
        format!(
            "the tensors' byte ranges end at byte {end} of the data but the file holds {held} \
             bytes after its header: {}",
            if held < end {
                "it is cut short; save it again (or download it again)"
            } else {
                "it has bytes no tensor covers (trailing data), which the format does not \
                 allow; save it again"
            }
        )
    })
}

fn from_bytes(op: &'static str, bytes: &[u8], device: Device) -> Result<HashMap<String, Tensor>> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| read_error(op, bytes, e))?;
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
