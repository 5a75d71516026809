//! One tensor in NumPy's `.npy` format (`numpy.save` / `numpy.load`).
//!
//! A `.npy` file is the magic string `\x93NUMPY`, a version (1.0, 2.0 or
//! 3.0), the header's length (2 bytes in 1.0, 4 bytes after), a header that
//! is a Python dict literal (`{'descr': '<f4', 'fortran_order': False,
//! 'shape': (2, 3), }`) padded with spaces to a multiple of 64 bytes, and the
//! elements.
//!
//! * **Writing** ([`save_npy`], [`npy_to_bytes`]): version 1.0 (2.0 when the
//!   header needs it), C order, little-endian: `<f4 <f8 <f2 <i8 <i4 |u1
//!   |b1`. NumPy has no bfloat16, so a bf16 tensor is [`TensorError::DType`]
//!   (convert it with `to_dtype(DType::F32)` first); a tensor of more than
//!   64 dims (NumPy's limit) is [`TensorError::Shape`].
//! * **Reading** ([`load_npy`], [`npy_from_bytes`]): versions 1.0–3.0, C or
//!   Fortran order, little- or big-endian, the dtypes `f4 f8 f2 i8 i4 u1 b1`
//!   as themselves and `i2 i1 u2` widened to i32 (strata has no 8- or 16-bit
//!   signed integers; the values are exact), also as NumPy's one-letter
//!   codes (`f d e q i B ?`, `h b H`). Anything else (object arrays,
//!   complex, unsigned 32/64-bit, strings, datetimes) is
//!   [`TensorError::DType`]; a structured array (whose `descr` is a list,
//!   not a type string), a malformed header, a header over 1 MiB, or data
//!   whose byte count does not match the shape is [`TensorError::Format`].
//!   A shape whose byte count overflows is [`TensorError::SizeOverflow`].
//! * Writing refuses (as [`TensorError::SizeOverflow`]) an empty tensor
//!   whose sizes multiply past i64::MAX when its zeros are counted as ones
//!   (`[2^40, 2^40, 0]`): `numpy.load` could not read the file.
//!
//! ```
//! use strata_tensor::{interop, Device, Tensor};
//! let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], Device::Cpu)?;
//! let bytes = interop::npy_to_bytes(&t)?;
//! assert!(bytes.starts_with(b"\x93NUMPY\x01\x00"));
//! assert_eq!(bytes.len() % 64, 24 % 64);  // header aligned to 64 bytes, then 24 bytes of data
//! assert!(interop::npy_from_bytes(&bytes, Device::Cpu)?.equal(&t)?);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

use super::{format_error, read_file, swap_bytes, write_file, Need};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::tensor::Tensor;
use std::path::Path;
use strata_alloc::Device;

const FORMAT: &str = "npy";
const MAGIC: &[u8] = b"\x93NUMPY";
/// The largest header strata reads (NumPy's own default limit is 10 000
/// bytes; a larger one is only legitimate for huge structured dtypes, which
/// strata does not read).
const MAX_HEADER: usize = 1 << 20;

/// NumPy's type string of a strata dtype (little-endian).
fn descr(op: &'static str, dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::BF16 => {
            return Err(TensorError::dtype(
                op,
                "NumPy has no bfloat16 dtype, so a bf16 tensor cannot be written as .npy; \
                 convert it first (`t.to_dtype_contiguous(DType::F32)`) or use safetensors, which has BF16",
            ))
        }
    })
}

/// Serialises a tensor (any device, any layout; written in C order) as the
/// bytes of a `.npy` file.
pub fn npy_to_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    const OP: &str = "npy_to_bytes";
    let (header, data) = to_bytes(OP, tensor)?;
    let mut out = super::reserved(OP, header.len().saturating_add(data.len()), "the file")?;
    out.extend_from_slice(&header);
    out.extend_from_slice(&data);
    Ok(out)
}

/// Saves a tensor as a `.npy` file at `path` (`numpy.save`). A bf16 tensor
/// is [`TensorError::DType`]; an I/O failure is [`TensorError::Io`].
///
/// The tensor is read before the file is opened, and an existing file is
/// replaced only once the new one is complete (see [`save_safetensors`]
/// for how links, FIFOs and devices are written).
///
/// [`save_safetensors`]: super::save_safetensors
pub fn save_npy(path: impl AsRef<Path>, tensor: &Tensor) -> Result<()> {
    const OP: &str = "save_npy";
    let (header, data) = to_bytes(OP, tensor)?;
    write_file(OP, path.as_ref(), |w| {
        w.write_all(&header)?;
        w.write_all(&data)
    })
}

/// The most dims NumPy's arrays have (`NPY_MAXDIMS` of NumPy 2), and so
/// the most a `.npy` file may hold.
const MAX_DIMS: usize = 64;

/// The header (magic string to newline) and the elements of a tensor's file.
fn to_bytes(op: &'static str, tensor: &Tensor) -> Result<(Vec<u8>, Vec<u8>)> {
    let descr = descr(op, tensor.dtype())?;
    if tensor.ndim() > MAX_DIMS {
        // A file NumPy (and `npy_from_bytes`) could not load.
        return Err(TensorError::shape(
            op,
            format!(
                "a .npy file holds at most {MAX_DIMS} dims (NumPy's limit) and the tensor has {}; \
                 reshape it first, or save it as safetensors",
                tensor.ndim()
            ),
        ));
    }
    // NumPy refuses an array whose element size times the product of its
    // sizes (a 0 counted as 1) passes i64::MAX ("array is too big"), even
    // an empty one; strata holds such empty tensors (`[2^40, 2^40, 0]`)
    // but `numpy.load` could not read their file.
    let fits = tensor
        .shape()
        .iter()
        .try_fold(tensor.dtype().size(), |acc, &s| acc.checked_mul(s.max(1)))
        .is_some_and(|n| n <= i64::MAX as usize);
    if !fits {
        return Err(TensorError::overflow(
            op,
            format!(
                "a {} tensor of shape {:?} cannot be written as .npy: NumPy refuses an array \
                 whose element size times the product of its sizes (a 0 counted as 1) exceeds \
                 i64::MAX, even an empty one (\"array is too big\"); reshape it first (e.g. \
                 `t.reshape(&[0])`)",
                tensor.dtype(),
                tensor.shape()
            ),
        ));
    }
    let shape = match tensor.shape() {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Version 1.0 has a 2-byte header length; pad magic + version + length +
    // header + '\n' to a multiple of 64 bytes as NumPy does.
    // (64: the most the padding adds.)
    let (version, len_bytes) = if header.len() + 1 + 64 <= u16::MAX as usize {
        (1u8, 2usize)
    } else {
        (2u8, 4usize)
    };
    let prefix = MAGIC.len() + 2 + len_bytes;
    let total = (prefix + header.len() + 1).next_multiple_of(64);
    header.push_str(&" ".repeat(total - prefix - header.len() - 1));
    header.push('\n');
    let data = tensor.to_raw_bytes()?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    Ok((out, data))
}

/// Reads a tensor from the bytes of a `.npy` file onto `device`.
///
/// The header is validated before anything is allocated; see the module
/// docs for what is read and which errors a bad file gives.
pub fn npy_from_bytes(bytes: &[u8], device: Device) -> Result<Tensor> {
    from_bytes("npy_from_bytes", bytes, None, device)
}

/// Loads the tensor of the `.npy` file at `path` onto `device`
/// (`numpy.load`). Errors as [`npy_from_bytes`], plus [`TensorError::Io`]
/// naming the file.
pub fn load_npy(path: impl AsRef<Path>, device: Device) -> Result<Tensor> {
    const OP: &str = "load_npy";
    // A file with more bytes than its header needs is read only one past
    // them: its size (when the file system knows it) goes into the error.
    let (bytes, size) = read_file(OP, path.as_ref(), need)?;
    from_bytes(OP, &bytes, size, device)
}

/// How the elements of a file are read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Elem {
    /// As a strata dtype, byte for byte (after byte-swapping when needed).
    Exact(DType),
    /// i1/i2/u2 widened to i32.
    Widen { bytes: usize, signed: bool },
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::Exact(d) => d.size(),
            Elem::Widen { bytes, .. } => bytes,
        }
    }
}

/// A parsed header.
#[derive(Debug)]
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<usize>,
}

/// Where the header ends (the elements start), from the magic string,
/// version and length field; `None` when they are malformed, the header is
/// longer than strata reads, or the bytes end before the length field.
fn header_end(bytes: &[u8]) -> Option<usize> {
    if bytes.get(..MAGIC.len())? != MAGIC {
        return None;
    }
    let len_bytes = match (*bytes.get(6)?, *bytes.get(7)?) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return None,
    };
    let len_end = 8 + len_bytes;
    let header_len = bytes
        .get(8..len_end)?
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    (header_len <= MAX_HEADER).then_some(len_end + header_len)
}

/// How much of a file `load_npy` reads: the header, then the byte count it
/// gives (see `interop::read_file`).
fn need(bytes: &[u8]) -> Need {
    // The magic string, the version and the longer (4-byte) length field.
    const PREFIX: usize = 12;
    if bytes.len() < PREFIX {
        return Need::AtLeast(PREFIX);
    }
    match header_end(bytes) {
        Some(end) if bytes.len() < end => Need::AtLeast(end),
        Some(_) => match layout("load_npy", bytes) {
            Ok(l) => l
                .data_start
                .checked_add(l.nbytes)
                .map_or(Need::Stop, Need::Total),
            Err(_) => Need::Stop,
        },
        None => Need::Stop,
    }
}

/// What a file's header says: the parsed header, how its elements are read,
/// where they start and how many bytes they take.
struct FileLayout {
    header: Header,
    elem: Elem,
    big_endian: bool,
    data_start: usize,
    nbytes: usize,
}

/// Reads and checks the header of the file in `bytes` (which may end after
/// it).
fn layout(op: &'static str, bytes: &[u8]) -> Result<FileLayout> {
    let bad = |msg: String| format_error(op, FORMAT, msg);
    if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad(
            "the file does not start with NumPy's magic string \\x93NUMPY".into(),
        ));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => {
            return Err(bad(format!(
                "format version {major}.{minor} is not one strata reads (1.0, 2.0, 3.0)"
            )))
        }
    };
    let len_end = 8 + len_bytes;
    let len_field = bytes
        .get(8..len_end)
        .ok_or_else(|| bad("the file ends inside the header length".into()))?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    if header_len > MAX_HEADER {
        return Err(bad(format!(
            "the header claims {header_len} bytes, more than the {MAX_HEADER} strata reads"
        )));
    }
    let data_start = len_end + header_len;
    let header_bytes = bytes.get(len_end..data_start).ok_or_else(|| {
        bad(format!(
            "the header claims {header_len} bytes but the file has {} after the length field",
            bytes.len() - len_end
        ))
    })?;
    let text = std::str::from_utf8(header_bytes)
        .map_err(|_| bad("the header is not ASCII/UTF-8 text".into()))?;
    let header = parse_header(text).map_err(|m| bad(format!("header {}: {m}", quoted(text))))?;
    let (elem, big_endian) = parse_descr(&header.descr).map_err(|m| TensorError::dtype(op, m))?;
    let numel = shape::check_contiguous(op, &header.shape)?;
    let nbytes = shape::checked_nbytes(op, &header.shape, numel, elem.size())?;
    Ok(FileLayout {
        header,
        elem,
        big_endian,
        data_start,
        nbytes,
    })
}

/// The tensor of the file in `bytes`; `file_len`, when given, is the whole
/// file's size, which `bytes` (read only as far as the header needs) may
/// fall short of.
fn from_bytes(
    op: &'static str,
    bytes: &[u8],
    file_len: Option<usize>,
    device: Device,
) -> Result<Tensor> {
    let bad = |msg: String| format_error(op, FORMAT, msg);
    let FileLayout {
        header,
        elem,
        big_endian,
        data_start,
        nbytes,
    } = layout(op, bytes)?;
    let data = &bytes[data_start..];
    if data.len() != nbytes {
        return Err(bad(format!(
            "shape {:?} with {}-byte elements needs {nbytes} bytes of data but the file has {}",
            header.shape,
            elem.size(),
            file_len.map_or(data.len(), |n| n.saturating_sub(data_start).max(data.len()))
        )));
    }
    // The elements as stored: C order over `stored_shape`.
    let stored_shape: Vec<usize> = if header.fortran {
        header.shape.iter().rev().copied().collect()
    } else {
        header.shape.clone()
    };
    let t = match elem {
        Elem::Exact(dtype) if big_endian && dtype.size() > 1 => {
            // `from_raw_bytes` takes little-endian bytes.
            let mut owned = super::host_buffer(op, data.len())?;
            owned.copy_from_slice(data);
            swap_bytes(&mut owned, dtype.size());
            Tensor::from_raw_bytes(&owned, dtype, &stored_shape, device)?
        }
        Elem::Exact(dtype) => Tensor::from_raw_bytes(data, dtype, &stored_shape, device)?,
        Elem::Widen { bytes: 1, .. } => {
            let v = super::widened(op, data.len(), data.iter().map(|&b| i32::from(b as i8)))?;
            Tensor::from_slice(&v, &stored_shape, device)?
        }
        Elem::Widen { signed, .. } => {
            let elems = data.chunks_exact(2).map(|c| {
                let raw = if big_endian {
                    [c[1], c[0]]
                } else {
                    [c[0], c[1]]
                };
                if signed {
                    i32::from(i16::from_le_bytes(raw))
                } else {
                    i32::from(u16::from_le_bytes(raw))
                }
            });
            let v = super::widened(op, data.len() / 2, elems)?;
            Tensor::from_slice(&v, &stored_shape, device)?
        }
    };
    if header.fortran && header.shape.len() > 1 {
        let rev: Vec<i64> = (0..header.shape.len() as i64).rev().collect();
        t.permute(&rev)?.contiguous()
    } else {
        Ok(t)
    }
}

/// The header's text for an error message: all of it when short, else its
/// start and its length (a hostile header may be a megabyte long).
fn quoted(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return format!("{text:?}");
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes in all)", &text[..end], text.len())
}

/// Parses the header's dict literal: exactly the keys `descr`,
/// `fortran_order` and `shape`, each once.
fn parse_header(text: &str) -> std::result::Result<Header, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        match key.as_str() {
            "descr" if descr.is_none() && p.peek() == Some(b'[') => {
                return Err(
                    "'descr' is a list: a structured dtype (named fields), which strata does \
                     not read; save each field as an array of its own (`a['x']`) or convert \
                     the array (`numpy.lib.recfunctions.structured_to_unstructured`)"
                        .into(),
                )
            }
            "descr" if descr.is_none() => descr = Some(p.string()?),
            "fortran_order" if fortran.is_none() => fortran = Some(p.boolean()?),
            "shape" if shape.is_none() => shape = Some(p.tuple()?),
            "descr" | "fortran_order" | "shape" => {
                return Err(format!("key {key:?} appears twice"))
            }
            _ => {
                return Err(format!(
                    "unexpected key {key:?} (a .npy header has descr, fortran_order and shape)"
                ))
            }
        }
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("text after the closing brace".into());
    }
    let descr = descr.ok_or("no 'descr' key")?;
    let fortran = fortran.ok_or("no 'fortran_order' key")?;
    let shape = shape.ok_or("no 'shape' key")?;
    Ok(Header {
        descr,
        fortran,
        shape,
    })
}

/// Maps a type string (`<f4`, `|b1`, `>i8`, ...) to how it is read.
fn parse_descr(d: &str) -> std::result::Result<(Elem, bool), String> {
    let (order, code) = match d.as_bytes().first() {
        Some(b'<' | b'>' | b'|' | b'=') => d.split_at(1),
        _ => ("=", d),
    };
    let big_endian = match order {
        ">" => true,
        "=" => cfg!(target_endian = "big"),
        _ => false,
    };
    let elem = match code {
        // NumPy's one-letter type codes are read too (`numpy.dtype('f')`):
        // `f d e h H b B ?`; `i` and `q` are C's int and long long, 32 and
        // 64 bits wherever NumPy runs.
        "f4" | "f" => Elem::Exact(DType::F32),
        "f8" | "d" => Elem::Exact(DType::F64),
        "f2" | "e" => Elem::Exact(DType::F16),
        "i8" | "q" => Elem::Exact(DType::I64),
        "i4" | "i" => Elem::Exact(DType::I32),
        "u1" | "B" => Elem::Exact(DType::U8),
        "b1" | "?" => Elem::Exact(DType::Bool),
        "i2" | "h" => Elem::Widen {
            bytes: 2,
            signed: true,
        },
        "u2" | "H" => Elem::Widen {
            bytes: 2,
            signed: false,
        },
        "i1" | "b" => Elem::Widen {
            bytes: 1,
            signed: true,
        },
        _ => {
            return Err(format!(
                "dtype {d:?} is not one strata reads (f4 f8 f2 i8 i4 i2 i1 u2 u1 b1); \
                 convert the array first (e.g. `a.astype(np.float32)`)"
            ))
        }
    };
    if order == "|" && elem.size() > 1 {
        return Err(format!(
            "dtype {d:?}: '|' (no byte order) on a multi-byte type"
        ));
    }
    Ok((elem, big_endian))
}

/// A cursor over the header's dict literal.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    /// Python's whitespace between tokens (form feed included).
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected {:?} at byte {}, found {}",
                c as char,
                self.i,
                self.peek()
                    .map_or("the end".to_string(), |b| format!("{:?}", b as char))
            ))
        }
    }
    /// A quoted string without escapes (NumPy writes none).
    fn string(&mut self) -> std::result::Result<String, String> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a quoted string at byte {}", self.i)),
        };
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == q {
                let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                return Ok(s);
            }
            if c == b'\\' {
                return Err("escapes in header strings are not supported".into());
            }
            self.i += 1;
        }
        Err("unterminated string".into())
    }
    fn boolean(&mut self) -> std::result::Result<bool, String> {
        for (word, v) in [("True", true), ("False", false)] {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(format!("expected True or False at byte {}", self.i))
    }
    /// `()`, `(3,)`, `(2, 3)`, `(2, 3,)`; sizes are decimal integers (a
    /// Python 2 `L` suffix is accepted).
    fn tuple(&mut self) -> std::result::Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        // Python's tuple syntax: `(3)` is the int 3 (NumPy refuses it as a
        // shape), `(3,)` the one-element tuple.
        let mut comma_after_last = false;
        loop {
            self.ws();
            if self.eat(b')') {
                break;
            }
            let start = self.i;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
            if start == self.i {
                return Err(format!(
                    "expected a non-negative integer size at byte {}",
                    self.i
                ));
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            // Python 3 reads `00` (zero) but not `007`.
            if digits.starts_with('0') && digits.bytes().any(|b| b != b'0') {
                return Err(format!(
                    "size {digits} has a leading zero, which Python 3 (and NumPy) does not read"
                ));
            }
            let n: usize = digits
                .parse()
                .map_err(|_| format!("size {digits} does not fit in usize"))?;
            dims.push(n);
            self.eat(b'L');
            self.ws();
            comma_after_last = self.eat(b',');
            if !comma_after_last {
                self.ws();
                self.expect(b')')?;
                break;
            }
        }
        if dims.len() == 1 && !comma_after_last {
            return Err(format!(
                "shape ({}) is an integer, not a tuple; a one-element shape is written ({},)",
                dims[0], dims[0]
            ));
        }
        if dims.len() > MAX_DIMS {
            return Err(format!(
                "{} dims is more than strata reads ({MAX_DIMS}, NumPy's limit)",
                dims.len()
            ));
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpy_headers() {
        let h = parse_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    \n")
            .unwrap();
        assert_eq!(h.descr, "<f4");
        assert!(!h.fortran);
        assert_eq!(h.shape, vec![2, 3]);
        let h =
            parse_header("{\"shape\": (), \"fortran_order\": True, \"descr\": \">i2\"}").unwrap();
        assert!(h.fortran);
        assert_eq!(h.shape, Vec::<usize>::new());
        assert_eq!(
            parse_descr(&h.descr).unwrap(),
            (
                Elem::Widen {
                    bytes: 2,
                    signed: true
                },
                true
            )
        );
        assert_eq!(
            parse_descr("<f4").unwrap(),
            (Elem::Exact(DType::F32), false)
        );
        assert_eq!(
            parse_descr("|b1").unwrap(),
            (Elem::Exact(DType::Bool), false)
        );
        for d in ["<c8", "|f4", "<u8", "f5", ""] {
            assert!(parse_descr(d).is_err(), "accepted {d:?}");
        }
        assert_eq!(
            parse_header("{'descr':'|b1','fortran_order':False,'shape':(7,)}")
                .unwrap()
                .shape,
            vec![7]
        );
    }

    #[test]
    fn rejects_bad_headers() {
        for h in [
            "",
            "{",
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ()} trailing",
            "{'descr': '<f4\\'', 'fortran_order': False, 'shape': ()}",
        ] {
            assert!(parse_header(h).is_err(), "accepted {h:?}");
        }
    }
}
