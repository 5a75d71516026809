//! Session 48's sweep of hostile files for the interop loaders
//! (`npy_from_bytes`, `load_npy`, `safetensors_from_bytes`,
//! `load_safetensors`), after `interop.rs` and `hostile_sweep_s35/43/44.rs`.
//!
//! What the earlier tests do not try, and this file does:
//!
//! * `.npy`: every prefix of valid files of each version; header lengths at
//!   and past the 1 MiB limit in versions 2 and 3; headers that are not
//!   UTF-8, empty, or cut inside the dict; dicts with keys missing, doubled
//!   or extra, non-bool `fortran_order`, and shapes that are not tuples of
//!   Python integers; 64 and 65 dims; sizes that overflow only with the
//!   zero-size dim after them, or only in Fortran order; every dtype in
//!   big-endian order and the narrow ones widened, in Fortran order, against
//!   values computed here; empty arrays; files on disk whose header claims
//!   terabytes.
//! * safetensors: duplicate tensor names; overlapping, reversed, holed and
//!   out-of-range byte ranges; offsets and sizes near 2^64; JSON of the
//!   wrong shape (not an object, non-integer sizes, extra fields,
//!   `__metadata__` that is not a string map); JSON nested 100 000 deep (a
//!   stack overflow would abort the process); 10 000 dims; files on disk
//!   whose header claims exabytes.
//! * Property tests: several random byte edits (replace, flip, insert,
//!   delete) of valid files of every dtype, order and version, and edits of
//!   the numbers and type strings inside the headers (the header length
//!   kept right, so the edit reaches the parser's arithmetic). Each file is
//!   loaded from memory and from disk: the two agree, neither panics, and a
//!   loaded tensor is self-consistent (its bytes match its shape and dtype).
//!
//! Defects the sweep found, fixed in the same session (their tests below
//! failed before):
//!
//! * Widening a file's narrow integers (safetensors I8/I16/U16/U32, `.npy`
//!   i1/i2/u2) collected them into a vector with an infallible allocation:
//!   a file whose widened copy the host cannot hold aborted the process
//!   ("memory allocation of 805306368 bytes failed") instead of failing
//!   typed.
//! * A safetensors header naming a tensor twice loaded, the last entry
//!   silently winning (the format's spec: "Duplicate keys are disallowed";
//!   the same 4 bytes read as `U8 [4]` by a checker that keeps the first
//!   entry and `F32 [1]` by strata).
//! * A `.npy` header whose shape is not a tuple (`'shape': (3)`, an int in
//!   Python), or holds integers Python does not accept (`(007,)`), loaded;
//!   `numpy.load` refuses both ("shape is not valid: 3", "Cannot parse
//!   header").

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use strata_tensor::{interop, DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

// ----- helpers -------------------------------------------------------------------

/// A `.npy` file of `major`.0 with exactly the header text `header` (no
/// padding added) and then `data`.
fn npy_raw(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x93, b'N', b'U', b'M', b'P', b'Y', major, 0];
    if major == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A version-1.0 `.npy` file with NumPy's dict for `descr`, `fortran` and the
/// shape literal `shape`.
fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}\n",
        if fortran { "True" } else { "False" }
    );
    npy_raw(1, &dict, data)
}

/// A safetensors file: 8-byte little-endian header length, `header`, `data`.
fn st(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The error kinds a bad file may give (a panic, an abort or a success is
/// not among them).
fn is_typed(e: &TensorError) -> bool {
    matches!(
        e,
        TensorError::Format { .. }
            | TensorError::SizeOverflow { .. }
            | TensorError::DType { .. }
            | TensorError::Io { .. }
    )
}

/// Asserts `r` is a typed error of the kinds above.
fn assert_typed<T: std::fmt::Debug>(what: &str, r: Result<T, TensorError>) -> TensorError {
    match r {
        Err(e) if is_typed(&e) => e,
        other => panic!("{what}: expected a Format/SizeOverflow/DType error, got {other:?}"),
    }
}

/// Asserts `r` is a `Format` error.
fn assert_format<T: std::fmt::Debug>(what: &str, r: Result<T, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Format { .. }) => e.to_string(),
        other => panic!("{what}: expected a Format error, got {other:?}"),
    }
}

/// A loaded tensor is self-consistent: contiguous, its element count the
/// product of its shape, its bytes that many elements of its dtype, and
/// printable. Returns its bytes.
fn consistent(t: &Tensor) -> Vec<u8> {
    let numel: usize = t.shape().iter().product();
    assert_eq!(t.numel(), numel, "numel of {:?}", t.shape());
    assert!(t.is_contiguous(), "a loaded tensor is contiguous");
    let bytes = t.to_raw_bytes().unwrap();
    assert_eq!(
        bytes.len(),
        numel * t.dtype().size(),
        "bytes of {:?} {}",
        t.shape(),
        t.dtype()
    );
    let _ = format!("{t}");
    bytes
}

/// A path in the temporary directory unique to this process and call.
fn temp_path(ext: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "strata-s48-{}-{}.{ext}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A temporary file removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(ext: &str, bytes: &[u8]) -> TempFile {
        let p = temp_path(ext);
        std::fs::write(&p, bytes).unwrap();
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A tensor's identity for comparisons: dtype, shape, bytes.
fn ident(t: &Tensor) -> (DType, Vec<usize>, Vec<u8>) {
    (t.dtype(), t.shape().to_vec(), consistent(t))
}

/// Loads `bytes` as `.npy` from memory and from a file: both typed errors
/// or both the same tensor.
fn npy_both_ways(bytes: &[u8]) -> Option<Tensor> {
    let mem = npy_from_bytes_checked(bytes);
    let f = TempFile::new("npy", bytes);
    let disk = interop::load_npy(&f.0, CPU);
    match (&mem, &disk) {
        (Ok(a), Ok(b)) => assert_eq!(ident(a), ident(b), "memory and file loads differ"),
        (Err(_), Err(e)) => assert!(is_typed(e), "load_npy: {e:?}"),
        _ => panic!(
            "npy_from_bytes and load_npy disagree: {:?} vs {:?}",
            mem.as_ref().map(ident),
            disk.as_ref().map(ident)
        ),
    }
    mem.ok()
}

fn npy_from_bytes_checked(bytes: &[u8]) -> Result<Tensor, TensorError> {
    let r = interop::npy_from_bytes(bytes, CPU);
    match &r {
        Ok(t) => {
            consistent(t);
        }
        Err(e) => assert!(is_typed(e), "npy_from_bytes: {e:?}"),
    }
    r
}

type Named = std::collections::HashMap<String, Tensor>;

/// Loads `bytes` as safetensors from memory and from a file: both typed
/// errors or both the same tensors.
fn st_both_ways(bytes: &[u8]) -> Option<Named> {
    let mem = interop::safetensors_from_bytes(bytes, CPU);
    if let Err(e) = &mem {
        assert!(is_typed(e), "safetensors_from_bytes: {e:?}");
    }
    let f = TempFile::new("safetensors", bytes);
    let disk = interop::load_safetensors(&f.0, CPU);
    match (&mem, &disk) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.len(), b.len());
            for (name, t) in a {
                assert_eq!(ident(t), ident(&b[name]), "tensor {name:?}");
            }
        }
        (Err(_), Err(e)) => assert!(is_typed(e), "load_safetensors: {e:?}"),
        _ => panic!(
            "safetensors_from_bytes and load_safetensors disagree: {:?} vs {:?}",
            mem.as_ref().map(|m| m.keys().cloned().collect::<Vec<_>>()),
            disk.as_ref().map(|m| m.keys().cloned().collect::<Vec<_>>())
        ),
    }
    mem.ok()
}

// ----- .npy: structure -------------------------------------------------------------

/// Every proper prefix of a valid file (versions 1.0, 2.0 and 3.0; the
/// header, the dict, the data cut anywhere) is a typed error, never a
/// tensor; and so is the file with one byte more.
#[test]
fn npy_every_prefix_and_one_byte_more_are_errors() {
    let dict = "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }\n";
    let data: Vec<u8> = (1i16..=6).flat_map(|v| v.to_le_bytes()).collect();
    for major in [1u8, 2, 3] {
        let full = npy_raw(major, dict, &data);
        assert_eq!(
            npy_both_ways(&full).unwrap().to_vec::<i32>().unwrap(),
            vec![1, 3, 5, 2, 4, 6],
            "v{major}"
        );
        for cut in 0..full.len() {
            assert_typed(
                &format!("v{major} cut at {cut}"),
                interop::npy_from_bytes(&full[..cut], CPU),
            );
        }
        let mut more = full.clone();
        more.push(0);
        assert_format(
            &format!("v{major} + 1 byte"),
            interop::npy_from_bytes(&more, CPU),
        );
    }
}

/// Header lengths in the 4-byte field of versions 2 and 3: exactly 1 MiB
/// (the most strata reads) of dict and spaces loads; one byte more is
/// refused before it is read; a length past the end of the file is a
/// `Format` error naming the bytes there are.
#[test]
fn npy_header_lengths_at_the_limit() {
    const MIB: usize = 1 << 20;
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    for major in [2u8, 3] {
        let mut header = dict.to_string();
        header.push_str(&" ".repeat(MIB - dict.len() - 1));
        header.push('\n');
        assert_eq!(header.len(), MIB);
        let ok = npy_raw(major, &header, &1.5f32.to_le_bytes());
        let t = npy_both_ways(&ok).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.5]);
        header.push(' ');
        let over = npy_raw(major, &header, &1.5f32.to_le_bytes());
        let msg = assert_format(
            &format!("v{major} 1 MiB + 1"),
            interop::npy_from_bytes(&over, CPU),
        );
        assert!(msg.contains("more than"), "{msg}");
        // A length of 1000 bytes over a file of 100.
        let mut b = npy_raw(major, dict, &[]);
        b[8..12].copy_from_slice(&1000u32.to_le_bytes());
        assert_format(
            &format!("v{major} past the end"),
            interop::npy_from_bytes(&b, CPU),
        );
        npy_both_ways(&b);
    }
}

/// Headers that are not text, or not a dict: invalid UTF-8, an empty header,
/// NUL padding, a dict cut short by the length field, a list instead of a
/// dict, Python syntax strata does not take (escapes). Each a `Format`
/// error.
#[test]
fn npy_headers_that_are_not_a_dict() {
    let data = [0u8; 4];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty header", npy_raw(1, "", &data)),
        ("only spaces", npy_raw(1, "        \n", &data)),
        (
            "NUL padding",
            npy_raw(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\0\0\0\n",
                &data,
            ),
        ),
        (
            "a list",
            npy_raw(
                1,
                "[('descr', '<f4'), ('fortran_order', False), ('shape', (1,))]\n",
                &data,
            ),
        ),
        (
            "escape",
            npy_raw(
                1,
                "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,), }\n",
                &data,
            ),
        ),
        (
            "unclosed string",
            npy_raw(
                1,
                "{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }\n",
                &data,
            ),
        ),
        (
            "mismatched quotes",
            npy_raw(
                1,
                "{'descr\": '<f4', 'fortran_order': False, 'shape': (1,), }\n",
                &data,
            ),
        ),
        (
            "two dicts",
            npy_raw(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}{}\n",
                &data,
            ),
        ),
    ];
    for (what, b) in cases {
        assert_format(what, interop::npy_from_bytes(&b, CPU));
    }
    // Bytes that are not UTF-8 inside the dict, and a cut inside it (the
    // length field 20 bytes short: the rest reads as data).
    let mut b = npy("<f4", false, "(1,)", &data);
    let q = b.iter().position(|&c| c == b'<').unwrap();
    b[q] = 0xff;
    assert_format("invalid UTF-8", interop::npy_from_bytes(&b, CPU));
    let mut b = npy("<f4", false, "(1,)", &data);
    let len = u16::from_le_bytes([b[8], b[9]]) - 20;
    b[8..10].copy_from_slice(&len.to_le_bytes());
    assert_format("length field short", interop::npy_from_bytes(&b, CPU));
}

/// Dict keys: one missing, one doubled (even with the same value), one
/// unknown, keys in other cases: `Format` errors. (NumPy refuses a header
/// whose keys are not exactly the three.) Keys in any order load.
#[test]
fn npy_dict_keys_are_checked() {
    let data = 2.5f32.to_le_bytes();
    for (what, dict) in [
        ("no shape", "{'descr': '<f4', 'fortran_order': False}"),
        ("no descr", "{'fortran_order': False, 'shape': (1,)}"),
        ("no fortran_order", "{'descr': '<f4', 'shape': (1,)}"),
        (
            "shape twice",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}",
        ),
        (
            "fortran_order twice",
            "{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (1,)}",
        ),
        (
            "extra key",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'align': False}",
        ),
        (
            "capitalised key",
            "{'Descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        ),
        ("empty dict", "{}"),
        (
            "empty key",
            "{'': '<f4', 'fortran_order': False, 'shape': (1,)}",
        ),
    ] {
        assert_format(what, interop::npy_from_bytes(&npy_raw(1, dict, &data), CPU));
    }
    let t = interop::npy_from_bytes(
        &npy_raw(
            1,
            "{\"shape\":(1,),\"fortran_order\":False,\"descr\":\"<f4\"}",
            &data,
        ),
        CPU,
    )
    .unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.5]);
}

/// `fortran_order` values that are not Python's `True`/`False`: `Format`.
#[test]
fn npy_fortran_order_must_be_a_bool() {
    for v in [
        "1", "0", "true", "false", "'False'", "None", "Truee", "Fals", "",
    ] {
        let dict = format!("{{'descr': '<f4', 'fortran_order': {v}, 'shape': (1,)}}");
        assert_format(v, interop::npy_from_bytes(&npy_raw(1, &dict, &[0; 4]), CPU));
    }
}

/// Shapes that are not tuples of non-negative Python integers: negative,
/// float, hex, empty entries, nested, a list, a bool, an underscore
/// separator (Python accepts `1_0`; strata refuses it, which is allowed:
/// no writer emits it), a size past u64: `Format`.
#[test]
fn npy_shapes_that_are_not_tuples_of_sizes() {
    for shape in [
        "(-0,)",
        "(1.0,)",
        "(0x4,)",
        "(,)",
        "(1,,)",
        "((1,),)",
        "[1]",
        "(True,)",
        "(1_0,)",
        "(18446744073709551616,)",
        "(+1,)",
        "(1 1,)",
        "1",
        "",
    ] {
        assert_format(
            shape,
            interop::npy_from_bytes(&npy("<f4", false, shape, &[0; 40]), CPU),
        );
    }
}

/// `'shape': (3)` is the int 3 in Python, not a tuple: `numpy.load` refuses
/// the file ("shape is not valid: 3"). strata reads it as shape `[3]`.
///
/// ```python
/// np.load(io.BytesIO(b'\x93NUMPY\x01\x00' + ... "'shape': (3)}" ...))
/// # ValueError: shape is not valid: 3
/// ```
#[test]
fn npy_shape_without_a_comma_is_not_a_tuple() {
    let b = npy("<f4", false, "(3)", &[0; 12]);
    assert_format("(3)", interop::npy_from_bytes(&b, CPU));
}

/// `(007,)` is a syntax error in Python 3 (leading zeros in a decimal
/// integer): `numpy.load` refuses the header ("Cannot parse header").
/// strata reads it as shape `[7]`. (`(00,)` is valid Python: 0.)
#[test]
fn npy_shape_with_leading_zeros_is_not_python() {
    let b = npy("<f4", false, "(00,)", &[]);
    assert_eq!(interop::npy_from_bytes(&b, CPU).unwrap().shape(), &[0]);
    let b = npy("<f4", false, "(007,)", &[0; 28]);
    assert_format("(007,)", interop::npy_from_bytes(&b, CPU));
}

/// 64 dims (NumPy's limit) load; 65 are a `Format` error; a million are
/// refused without a million-entry shape being built into a tensor.
#[test]
fn npy_dims_at_the_limit() {
    let dims = |n: usize| format!("({})", vec!["1"; n].join(", ") + ",");
    let t = interop::npy_from_bytes(&npy("<f4", true, &dims(64), &[0; 4]), CPU).unwrap();
    assert_eq!(t.shape(), &[1; 64][..]);
    assert_format(
        "65 dims",
        interop::npy_from_bytes(&npy("<f4", false, &dims(65), &[0; 4]), CPU),
    );
    let mut b = npy_raw(
        2,
        &format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}}}",
            dims(300_000)
        ),
        &[0; 4],
    );
    assert_format("300 000 dims", interop::npy_from_bytes(&b, CPU));
    b.truncate(20);
    assert_typed("cut", interop::npy_from_bytes(&b, CPU));
}

/// Sizes whose product overflows only before a zero-size dim, and a shape
/// that is fine in C order but whose reversal (Fortran order stores the
/// dims reversed) has strides past i64::MAX: typed errors before any
/// allocation. (NumPy refuses both: "array is too big".) The C-order
/// `(2^62, 2, 0)` loads as PyTorch's `torch.empty(2**62, 2, 0)` exists.
#[test]
fn npy_sizes_that_overflow_only_in_part() {
    for (shape, fortran) in [
        ("(1099511627776, 1099511627776, 0)", false),
        ("(18446744073709551615, 0)", false),
        ("(0, 18446744073709551615)", false),
        ("(4611686018427387904, 2, 0)", true),
        ("(0, 9223372036854775807, 2)", false),
    ] {
        assert_typed(
            &format!("{shape} fortran={fortran}"),
            interop::npy_from_bytes(&npy("<f4", fortran, shape, &[]), CPU),
        );
    }
    let t = interop::npy_from_bytes(&npy("<f4", false, "(4611686018427387904, 2, 0)", &[]), CPU)
        .unwrap();
    assert_eq!(t.shape(), &[1 << 62, 2, 0]);
    consistent(&t);
    // Elements of 8 bytes: 2^60 of them are 2^63 bytes, past i64::MAX.
    assert!(matches!(
        interop::npy_from_bytes(&npy("<f8", false, "(1152921504606846976,)", &[]), CPU),
        Err(TensorError::SizeOverflow { .. })
    ));
}

/// Empty arrays of every layout load with their shape and no bytes.
#[test]
fn npy_empty_arrays() {
    for (descr, fortran, shape, want) in [
        ("<f4", false, "(0,)", vec![0]),
        ("<f8", true, "(5, 0)", vec![5, 0]),
        (">i2", true, "(0, 3, 2)", vec![0, 3, 2]),
        ("|i1", false, "(2, 0, 7)", vec![2, 0, 7]),
        ("|b1", true, "(0,)", vec![0]),
    ] {
        let t = npy_both_ways(&npy(descr, fortran, shape, &[])).unwrap();
        assert_eq!(t.shape(), &want[..], "{descr} {shape}");
        assert_eq!(t.numel(), 0);
    }
}

/// Object, structured, string, datetime and other dtypes strata does not
/// hold: typed errors (a structured dtype's list descr is not a string, so
/// `Format`), whatever the data. `|` on a multi-byte type is refused.
#[test]
fn npy_dtypes_strata_does_not_hold() {
    for descr in [
        "|O", "<O", "|V4", "<U1", "|S1", "<M8[ns]", "<m8[s]", "<c16", "<u8", "<u4", ">u4", "<f16",
        "<g", "|f4", "|i8", "f3", "<", "", "<f4 ", " <f4", "<F4",
    ] {
        let r = interop::npy_from_bytes(&npy(descr, false, "(2,)", &[0; 32]), CPU);
        assert!(
            matches!(
                r,
                Err(TensorError::DType { .. } | TensorError::Format { .. })
            ),
            "{descr:?}: {r:?}"
        );
    }
    let structured =
        "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }";
    assert_format(
        "structured",
        interop::npy_from_bytes(&npy_raw(1, structured, &[0; 8]), CPU),
    );
}

/// Every dtype strata reads, big-endian (`>`), little-endian (`<`) and
/// native (`=` and no prefix), C and Fortran order, 3-D: the values as the
/// row-major order of the array, computed here from the file's layout.
#[test]
fn npy_every_dtype_in_every_byte_order_and_layout() {
    // Element [i, j, k] of a [2, 3, 4] array holds v = 12 i + 4 j + k (+1 so
    // bools vary); Fortran order stores it at i + 2 j + 6 k.
    let shape = [2usize, 3, 4];
    let value = |i: usize, j: usize, k: usize| (12 * i + 4 * j + k) as i64 - 5;
    for (code, size) in [
        ("f4", 4),
        ("f8", 8),
        ("f2", 2),
        ("i8", 8),
        ("i4", 4),
        ("i2", 2),
        ("u2", 2),
        ("i1", 1),
        ("u1", 1),
        ("b1", 1),
    ] {
        for order in ['<', '>', '=', ' '] {
            let descr = if order == ' ' {
                code.to_string()
            } else {
                format!("{order}{code}")
            };
            let big = order == '>';
            for fortran in [false, true] {
                let mut data = vec![0u8; 24 * size];
                let mut want = Vec::new();
                for i in 0..2 {
                    for j in 0..3 {
                        for k in 0..4 {
                            let v = value(i, j, k);
                            let at = if fortran {
                                i + 2 * j + 6 * k
                            } else {
                                12 * i + 4 * j + k
                            };
                            let mut le: Vec<u8> = match code {
                                "f4" => (v as f32).to_le_bytes().to_vec(),
                                "f8" => (v as f64).to_le_bytes().to_vec(),
                                "f2" => half::f16::from_f64(v as f64).to_le_bytes().to_vec(),
                                "i8" => v.to_le_bytes().to_vec(),
                                "i4" => (v as i32).to_le_bytes().to_vec(),
                                "i2" => (v as i16).to_le_bytes().to_vec(),
                                "u2" => ((v + 60000) as u16).to_le_bytes().to_vec(),
                                "i1" => vec![v as i8 as u8],
                                "u1" => vec![(v + 200) as u8],
                                _ => vec![u8::from(v % 3 == 0) * 7],
                            };
                            if big {
                                le.reverse();
                            }
                            data[at * size..(at + 1) * size].copy_from_slice(&le);
                            want.push(match code {
                                "u2" => (v + 60000) as f64,
                                "u1" => (v + 200) as f64,
                                "b1" => f64::from(u8::from(v % 3 == 0)),
                                _ => v as f64,
                            });
                        }
                    }
                }
                let shape_lit = "(2, 3, 4)";
                let t = npy_both_ways(&npy(&descr, fortran, shape_lit, &data))
                    .unwrap_or_else(|| panic!("{descr} fortran={fortran} refused"));
                assert_eq!(t.shape(), &shape, "{descr}");
                let got: Vec<f64> = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                assert_eq!(got, want, "{descr} fortran={fortran}");
                let dtype = match code {
                    "f4" => DType::F32,
                    "f8" => DType::F64,
                    "f2" => DType::F16,
                    "i8" => DType::I64,
                    "u1" => DType::U8,
                    "b1" => DType::Bool,
                    _ => DType::I32,
                };
                assert_eq!(t.dtype(), dtype, "{descr}");
            }
        }
    }
}

/// Files on disk whose header claims a terabyte (and 2^62 bytes) of data
/// over a few bytes: a `Format` error naming the bytes the file has, read
/// without reserving what the header claims (a reservation of a terabyte
/// would fail or abort), quickly.
#[test]
fn npy_files_claiming_terabytes() {
    for shape in [
        "(1099511627776,)",
        "(1073741824, 1024)",
        "(1152921504606846975,)",
    ] {
        let f = TempFile::new("npy", &npy("<f4", false, shape, &[0; 100]));
        let t = std::time::Instant::now();
        let msg = assert_format(shape, interop::load_npy(&f.0, CPU));
        assert!(msg.contains("100"), "{msg}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}

// ----- safetensors: structure --------------------------------------------------------

/// A file of three tensors (F32 [2, 2], BOOL [3], I16 [1]) as
/// `safetensors.torch.save_file` lays it out.
fn st_three() -> Vec<u8> {
    let mut data = Vec::new();
    for v in [1.0f32, 2.0, 3.0, 4.0] {
        data.extend_from_slice(&v.to_le_bytes());
    }
    data.extend_from_slice(&[1, 0, 1]);
    data.extend_from_slice(&(-7i16).to_le_bytes());
    st(
        r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"m":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]},"s":{"dtype":"I16","shape":[1],"data_offsets":[19,21]}}"#,
        &data,
    )
}

/// Every proper prefix of a valid file, and the file with a byte more, is
/// a typed error (the format's byte buffer must be exactly covered).
#[test]
fn safetensors_every_prefix_and_one_byte_more_are_errors() {
    let full = st_three();
    let m = st_both_ways(&full).unwrap();
    assert_eq!(m["w"].to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(m["m"].to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(m["s"].to_vec::<i32>().unwrap(), vec![-7]);
    for cut in 0..full.len() {
        assert_typed(
            &format!("cut at {cut}"),
            interop::safetensors_from_bytes(&full[..cut], CPU),
        );
    }
    let mut more = full;
    more.push(0);
    assert_format("+1 byte", interop::safetensors_from_bytes(&more, CPU));
    st_both_ways(&more);
}

/// A header naming one tensor twice: the spec says "Duplicate keys are
/// disallowed". strata (through the `safetensors` crate's serde map) keeps
/// the last entry silently: the same 4 bytes are `U8 [4]` to a reader that
/// keeps the first entry and `F32 [1]` to strata. Expected: a `Format`
/// error naming the duplicate.
#[test]
fn safetensors_duplicate_names_are_refused() {
    let data = 1.0f32.to_le_bytes();
    let dup = st(
        r#"{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
        &data,
    );
    let r = interop::safetensors_from_bytes(&dup, CPU);
    assert_format("duplicate name", r);
}

/// What strata does with a duplicated name today (a guard, passing): no
/// panic, and the tensor it returns is the last entry's, self-consistent.
#[test]
fn safetensors_duplicate_names_do_not_panic() {
    let data = 1.0f32.to_le_bytes();
    let dup = st(
        r#"{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
        &data,
    );
    if let Some(m) = st_both_ways(&dup) {
        assert_eq!(m.len(), 1);
        consistent(&m["w"]);
    }
    // Duplicate names whose ranges would tile the buffer only together: the
    // earlier entry is dropped, leaving a hole: an error either way.
    let holed = st(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
        &[0; 8],
    );
    assert_typed(
        "duplicate leaving a hole",
        interop::safetensors_from_bytes(&holed, CPU),
    );
}

/// Byte ranges that overlap, are reversed, leave a hole, start past 0,
/// reach past the buffer, or hold numbers near 2^64 (where `end - begin`
/// or `begin + len` would wrap): `Format` errors, never a panic or a read
/// out of bounds.
#[test]
fn safetensors_bad_byte_ranges() {
    let max = u64::MAX;
    let cases = [
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#.to_string(), 8),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}"#.to_string(), 12),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.to_string(), 3),
        (format!(r#"{{"a":{{"dtype":"U8","shape":[{max}],"data_offsets":[0,{max}]}}}}"#), 0),
        (format!(r#"{{"a":{{"dtype":"U8","shape":[1],"data_offsets":[{max},0]}}}}"#), 1),
        (format!(r#"{{"a":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}},"b":{{"dtype":"U8","shape":[2],"data_offsets":[{},1]}}}}"#, max), 1),
        (r#"{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}"#.to_string(), 0),
        (r#"{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}"#.to_string(), 0),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4.0]}}"#.to_string(), 4),
        (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":"0,4"}}"#.to_string(), 4),
    ];
    for (header, n) in cases {
        let r = interop::safetensors_from_bytes(&st(&header, &vec![0; n]), CPU);
        assert_typed(&header, r);
    }
    // Empty tensors may share an offset (they take no bytes).
    let m = st_both_ways(&st(
        r#"{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]},"c":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
        &[9],
    ))
    .unwrap();
    assert_eq!(m["b"].shape(), &[3, 0]);
    assert_eq!(m["c"].to_vec::<u8>().unwrap(), vec![9]);
}

/// JSON of the wrong shape: not an object, a tensor entry that is not an
/// object, sizes that are negative, fractional, strings or nested, unknown
/// or lowercase dtypes, a missing field, an unknown field, a doubled field,
/// `__metadata__` that is not a map of strings, invalid UTF-8, a BOM, an
/// unterminated string: typed errors.
#[test]
fn safetensors_headers_of_the_wrong_shape() {
    let four = [0u8; 4];
    let ok_entry = r#""dtype":"F32","shape":[1],"data_offsets":[0,4]"#;
    let headers = [
        "[]".to_string(),
        "null".to_string(),
        "\"a\"".to_string(),
        "4".to_string(),
        "".to_string(),
        "{".to_string(),
        r#"{"a":4}"#.to_string(),
        r#"{"a":[]}"#.to_string(),
        r#"{"a":null}"#.to_string(),
        r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":"","shape":[1],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}"#.to_string(),
        r#"{"a":{"shape":[1],"data_offsets":[0,4]}}"#.to_string(),
        format!(r#"{{"a":{{{ok_entry},"dtype":"F32"}}}}"#),
        format!(r#"{{"__metadata__":{{"a":1}},"a":{{{ok_entry}}}}}"#),
        format!(r#"{{"__metadata__":[],"a":{{{ok_entry}}}}}"#),
        format!(r#"{{"__metadata__":{{"a":null}},"a":{{{ok_entry}}}}}"#),
        format!(r#"{{"__metadata__":{{}},"__metadata__":{{}},"a":{{{ok_entry}}}}}"#),
        format!("{{\"a\":{{{ok_entry}}}"),
        format!("{{\"a\u{0}\":{{{ok_entry}}}}}garbage"),
        format!("\u{feff}{{\"a\":{{{ok_entry}}}}}"),
        format!("{{\"a\":{{{ok_entry}}}}}\u{0}"),
        "{\"a\":{\"dtype\":\"F32,\"shape\":[1],\"data_offsets\":[0,4]}}".to_string(),
    ];
    for h in &headers {
        assert_typed(h, interop::safetensors_from_bytes(&st(h, &four), CPU));
    }
    // Not UTF-8 inside a name.
    let mut b = st(&format!("{{\"ab\":{{{ok_entry}}}}}"), &four);
    let at = b.iter().position(|&c| c == b'b').unwrap();
    b[at] = 0xc3;
    assert_typed("invalid UTF-8", interop::safetensors_from_bytes(&b, CPU));
    st_both_ways(&b);
    // A header of only `{}` and spaces (the spec's padding) loads nothing.
    assert!(st_both_ways(&st("{}        ", &[])).unwrap().is_empty());
}

/// JSON nested 100 000 deep, in `__metadata__`, in a tensor's entry, in an
/// unknown field and as the shape: a typed error (serde_json's recursion
/// limit), not a stack overflow, which would abort the whole process. Also
/// through `load_safetensors`, whose read-ahead parses the header too.
#[test]
fn safetensors_deeply_nested_json_is_a_typed_error() {
    const D: usize = 100_000;
    let arrays = format!("{}{}", "[".repeat(D), "]".repeat(D));
    let objects = format!("{}1{}", r#"{"x":"#.repeat(D), "}".repeat(D));
    for nest in [&arrays, &objects] {
        for h in [
            format!(r#"{{"__metadata__":{nest}}}"#),
            format!(r#"{{"a":{nest}}}"#),
            format!(r#"{{"a":{{"dtype":"F32","shape":{nest},"data_offsets":[0,0]}}}}"#),
            format!(r#"{{"a":{{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":{nest}}}}}"#),
        ] {
            let b = st(&h, &[]);
            assert_typed("nested", interop::safetensors_from_bytes(&b, CPU));
            st_both_ways(&b);
        }
    }
}

/// 10 000 dims of size 1 (a 20 kB header): a tensor of that shape, quickly
/// (strata has no limit on dims; an O(n^2) step would show here); a
/// hundred thousand dims with a 0: an empty tensor or a typed error.
#[test]
fn safetensors_many_dims() {
    let t0 = std::time::Instant::now();
    let dims = vec!["1"; 10_000].join(",");
    let h = format!(r#"{{"a":{{"dtype":"F32","shape":[{dims}],"data_offsets":[0,4]}}}}"#);
    let m = interop::safetensors_from_bytes(&st(&h, &2.5f32.to_le_bytes()), CPU).unwrap();
    assert_eq!(m["a"].ndim(), 10_000);
    assert_eq!(consistent(&m["a"]), 2.5f32.to_le_bytes());
    let dims = vec!["7"; 100_000].join(",") + ",0";
    let h = format!(r#"{{"a":{{"dtype":"F32","shape":[{dims}],"data_offsets":[0,0]}}}}"#);
    if let Ok(m) = interop::safetensors_from_bytes(&st(&h, &[]), CPU) {
        assert_eq!(m["a"].numel(), 0);
    }
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        t0.elapsed()
    );
}

/// Files on disk whose header claims exabytes of data (a valid header:
/// shape and range agree) over a few bytes, and a header length at the
/// format's 100 MB limit over a short file: `Format` errors, read without
/// reserving what the header claims, quickly.
#[test]
fn safetensors_files_claiming_exabytes() {
    let t = std::time::Instant::now();
    for (shape, end) in [
        ("[4611686018427387904]", 1u64 << 62),
        ("[4611686018427387903]", 4611686018427387903),
        ("[1099511627776]", 1 << 40),
    ] {
        let h = format!(r#"{{"a":{{"dtype":"U8","shape":{shape},"data_offsets":[0,{end}]}}}}"#);
        let f = TempFile::new("safetensors", &st(&h, &[0; 100]));
        assert_typed(shape, interop::load_safetensors(&f.0, CPU));
    }
    let mut b = 100_000_000u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    let f = TempFile::new("safetensors", &b);
    assert_typed("header at the limit", interop::load_safetensors(&f.0, CPU));
    b[..8].copy_from_slice(&100_000_001u64.to_le_bytes());
    let f = TempFile::new("safetensors", &b);
    assert_typed(
        "header past the limit",
        interop::load_safetensors(&f.0, CPU),
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}

// ----- widened dtypes and host memory ---------------------------------------------------

/// Set in the child process of
/// [`widened_dtypes_beyond_host_memory_are_typed_errors`].
const CHILD_ENV: &str = "STRATA_S48_LOW_MEMORY_CHILD";

/// A file of 192 MiB of `I8` (safetensors) or `|i1` (`.npy`) elements,
/// loaded in a process whose address space is limited to 1 GiB: widened
/// to i32 they need 768 MiB more, which the host cannot give. Expected, as
/// for every other allocation the loaders make (`host_buffer`,
/// `read_file`: `try_reserve`): a typed error, or the tensor. strata
/// collects the widened elements into a `Vec<i32>` with an infallible
/// allocation (`interop/safetensors.rs` `Read::ToI32`/`U32ToI64`,
/// `interop/npy.rs` `Elem::Widen`), so the process aborts ("memory
/// allocation of 805306368 bytes failed").
#[test]
fn widened_dtypes_beyond_host_memory_are_typed_errors() {
    const N: usize = 192 << 20;
    if let Some(which) = std::env::var_os(CHILD_ENV) {
        let r = if which == "npy" {
            let mut b = npy("|i1", false, &format!("({N},)"), &[]);
            b.resize(b.len() + N, 1);
            interop::npy_from_bytes(&b, CPU).map(|t| t.numel())
        } else {
            let h = format!(r#"{{"a":{{"dtype":"I8","shape":[{N}],"data_offsets":[0,{N}]}}}}"#);
            let mut b = st(&h, &[]);
            b.resize(b.len() + N, 1);
            interop::safetensors_from_bytes(&b, CPU).map(|m| m["a"].numel())
        };
        // Either outcome is right; reaching here without an abort is the test.
        println!("child result: {r:?}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for which in ["safetensors", "npy"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 1048576 && exec \"$0\" --exact \"$1\" --include-ignored --nocapture --test-threads=1")
            .arg(&exe)
            .arg("hostile_sweep_s48::widened_dtypes_beyond_host_memory_are_typed_errors")
            .env(CHILD_ENV, which)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !(out.status.success() && stdout.contains("child result")) {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = stderr.lines().find(|l| l.contains("memory")).unwrap_or("");
            failures.push(format!(
                "{which}: the loading process ended with {:?}: {first}",
                out.status
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ----- property tests: mutation ----------------------------------------------------------

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Edit {
    Replace(prop::sample::Index, u8),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Delete(prop::sample::Index),
    Truncate(prop::sample::Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Replace(i, b)),
        4 => (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        2 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        2 => any::<prop::sample::Index>().prop_map(Edit::Delete),
        1 => any::<prop::sample::Index>().prop_map(Edit::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, edits: &[Edit]) {
    for e in edits {
        if bytes.is_empty() {
            return;
        }
        match e {
            Edit::Replace(i, b) => {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
            Edit::Flip(i, bit) => {
                let i = i.index(bytes.len());
                bytes[i] ^= 1 << bit;
            }
            Edit::Insert(i, b) => {
                let i = i.index(bytes.len() + 1);
                bytes.insert(i, *b);
            }
            Edit::Delete(i) => {
                let i = i.index(bytes.len());
                bytes.remove(i);
            }
            Edit::Truncate(i) => {
                let i = i.index(bytes.len());
                bytes.truncate(i);
            }
        }
    }
}

/// Numbers that stress size arithmetic.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "7",
    "8",
    "16",
    "24",
    "2147483648",
    "4294967296",
    "4294967297",
    "9007199254740993",
    "1152921504606846976",
    "2305843009213693952",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "1e3",
    "00",
];

/// Replaces the `which`-th run of ASCII digits in `text` with `with`.
fn replace_number(text: &str, which: prop::sample::Index, with: &str) -> String {
    let b = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((s, i));
        } else {
            i += 1;
        }
    }
    if runs.is_empty() {
        return text.to_string();
    }
    let (s, e) = runs[which.index(runs.len())];
    format!("{}{with}{}", &text[..s], &text[e..])
}

/// A valid `.npy` file built here: any dtype strata reads (narrow ones
/// included), either byte order, either layout, version 1, 2 or 3, shape
/// of 0 to 3 dims of 0 to 3.
fn npy_file() -> impl Strategy<Value = Vec<u8>> {
    (
        0usize..10,
        any::<bool>(),
        any::<bool>(),
        1u8..4,
        proptest::collection::vec(0usize..4, 0..4),
        any::<u64>(),
    )
        .prop_map(|(d, big, fortran, major, shape, seed)| {
            let (code, size) = [
                ("f4", 4),
                ("f8", 8),
                ("f2", 2),
                ("i8", 8),
                ("i4", 4),
                ("i2", 2),
                ("u2", 2),
                ("i1", 1),
                ("u1", 1),
                ("b1", 1),
            ][d];
            let descr = format!("{}{code}", if big { '>' } else { '<' });
            let numel: usize = shape.iter().product();
            let mut x = seed;
            let data: Vec<u8> = (0..numel * size)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 56) as u8
                })
                .collect();
            let lit = match shape.as_slice() {
                [] => "()".to_string(),
                [n] => format!("({n},)"),
                s => format!(
                    "({})",
                    s.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let dict = format!(
                "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {lit}, }}\n",
                if fortran { "True" } else { "False" }
            );
            npy_raw(major, &dict, &data)
        })
}

/// A valid safetensors file written by strata: one to four tensors of any
/// dtype and small shapes (zero sizes included).
fn st_file() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (0usize..8, proptest::collection::vec(0usize..4, 0..3)),
        1..5,
    )
    .prop_map(|specs| {
        let dtypes = DType::ALL;
        let tensors: Vec<(String, Tensor)> = specs
            .iter()
            .enumerate()
            .map(|(i, (d, shape))| {
                let n: usize = shape.iter().product();
                let t = Tensor::arange(0.0, n as f64, 1.0, Some(DType::F64), CPU)
                    .unwrap()
                    .reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
                    .unwrap()
                    .to_dtype(dtypes[*d])
                    .unwrap();
                (format!("t{i}"), t)
            })
            .collect();
        interop::safetensors_to_bytes(tensors.iter().map(|(n, t)| (n.as_str(), t))).unwrap()
    })
}

/// The header text of a safetensors file, with its data.
fn st_split(b: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    (
        String::from_utf8(b[8..8 + n].to_vec()).unwrap(),
        b[8 + n..].to_vec(),
    )
}

/// The header text of a `.npy` file (version 1, 2 or 3), with its data.
fn npy_split(b: &[u8]) -> (u8, String, Vec<u8>) {
    let major = b[6];
    let (n, start) = if major == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    (
        major,
        String::from_utf8(b[start..start + n].to_vec()).unwrap(),
        b[start + n..].to_vec(),
    )
}

/// Type strings to put into a header in place of the one there.
const DESCRS: &[&str] = &[
    "<f4", ">f8", "<f2", "|b1", "|u1", "<i1", ">u2", "<i8", "|O", "<c8", "|f4", "<u8", "<U3", "",
    "<", "f4", "=i4",
];
const ST_DTYPES: &[&str] = &[
    "F32", "F64", "F16", "BF16", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL",
    "F8_E4M3", "F8_E5M2", "F4", "F6_E2M3", "C64", "E8M0", "X", "",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(384)
    ))]

    /// One to six random byte edits of a valid `.npy` file: loaded from
    /// memory and from disk, the same tensor or typed errors both, never a
    /// panic; a loaded tensor is self-consistent.
    #[test]
    fn npy_byte_edits(file in npy_file(), edits in proptest::collection::vec(edit(), 1..7)) {
        // The unedited file loads.
        prop_assert!(npy_from_bytes_checked(&file).is_ok());
        let mut b = file;
        apply(&mut b, &edits);
        npy_both_ways(&b);
    }

    /// A number in the header (a size, the version's digits in the dict)
    /// replaced by one that stresses size arithmetic, and the type string
    /// swapped, the length field kept right: the same checks.
    #[test]
    fn npy_header_number_and_type_edits(
        file in npy_file(),
        which in any::<prop::sample::Index>(),
        num in 0..NUMBERS.len(),
        swap_descr in proptest::option::of(0..DESCRS.len()),
        trim_data in any::<bool>(),
    ) {
        let (major, header, mut data) = npy_split(&file);
        let mut header = replace_number(&header, which, NUMBERS[num]);
        if let Some(d) = swap_descr {
            let s = header.find("'descr': '").unwrap() + 10;
            let e = s + header[s..].find('\'').unwrap();
            header = format!("{}{}{}", &header[..s], DESCRS[d], &header[e..]);
        }
        if trim_data {
            data.pop();
        }
        npy_both_ways(&npy_raw(major, &header, &data));
    }

    /// One to six random byte edits of a valid safetensors file of several
    /// tensors: the same checks.
    #[test]
    fn safetensors_byte_edits(file in st_file(), edits in proptest::collection::vec(edit(), 1..7)) {
        prop_assert!(interop::safetensors_from_bytes(&file, CPU).is_ok());
        let mut b = file;
        apply(&mut b, &edits);
        st_both_ways(&b);
    }

    /// A number in the JSON header (a size or an offset) replaced by one
    /// that stresses size arithmetic, a dtype swapped, the header length
    /// kept right: the same checks, and an accepted file's tensors each
    /// hold exactly their shape's bytes.
    #[test]
    fn safetensors_header_number_and_type_edits(
        file in st_file(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..NUMBERS.len()), 1..3),
        swap in proptest::option::of((any::<prop::sample::Index>(), 0..ST_DTYPES.len())),
        extra in proptest::collection::vec(any::<u8>(), 0..3),
    ) {
        let (mut header, mut data) = st_split(&file);
        for (which, num) in edits {
            header = replace_number(&header, which, NUMBERS[num]);
        }
        if let Some((which, d)) = swap {
            let spots: Vec<usize> = header.match_indices("\"dtype\":\"").map(|(i, _)| i + 9).collect();
            let s = spots[which.index(spots.len())];
            let e = s + header[s..].find('"').unwrap();
            header = format!("{}{}{}", &header[..s], ST_DTYPES[d], &header[e..]);
        }
        data.extend_from_slice(&extra);
        let b = st(&header, &data);
        if let Some(m) = st_both_ways(&b) {
            let total: usize = m.values().map(|t| t.numel() * t.dtype().size()).sum();
            prop_assert!(total >= data.len(), "{} bytes in memory for {} in the file", total, data.len());
        }
    }
}
