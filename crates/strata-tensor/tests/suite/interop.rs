//! Model files and array exchange: safetensors and `.npy` round trips over
//! every dtype, shape and layout (property tests whose expected bytes are
//! computed here by index arithmetic, not by strata), NumPy's exact byte
//! layout for `.npy`, hostile and corrupt files (typed errors, never a
//! panic), and the `ndarray` conversions (with `--features ndarray`).

use proptest::prelude::*;
use std::collections::HashMap;
use strata_tensor::{interop, DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

/// A strided view applied to a contiguous `[a, b, c]` tensor, and the same
/// view computed by index arithmetic on its row-major elements.
#[derive(Clone, Copy, Debug)]
enum View {
    Contiguous,
    /// `transpose(0, 2)`.
    Transpose,
    /// `narrow(1, 1, b - 1)` (needs b >= 1).
    Narrow,
    /// `select(0, a - 1)`.
    Select,
    /// `expand` of a `[1, b, c]` slice to `[3, b, c]` (stride 0).
    Expand,
}

/// `(shape, element indices into the contiguous source in row-major order of the view)`.
fn reference(view: View, [a, b, c]: [usize; 3]) -> (Vec<usize>, Vec<usize>) {
    let at = |i: usize, j: usize, k: usize| (i * b + j) * c + k;
    let mut idx = Vec::new();
    match view {
        View::Contiguous => {
            idx.extend(0..a * b * c);
            (vec![a, b, c], idx)
        }
        View::Transpose => {
            for k in 0..c {
                for j in 0..b {
                    for i in 0..a {
                        idx.push(at(i, j, k));
                    }
                }
            }
            (vec![c, b, a], idx)
        }
        View::Narrow => {
            for i in 0..a {
                for j in 1..b {
                    for k in 0..c {
                        idx.push(at(i, j, k));
                    }
                }
            }
            (vec![a, b - 1, c], idx)
        }
        View::Select => {
            for j in 0..b {
                for k in 0..c {
                    idx.push(at(a - 1, j, k));
                }
            }
            (vec![b, c], idx)
        }
        View::Expand => {
            for _ in 0..3 {
                for j in 0..b {
                    for k in 0..c {
                        idx.push(at(0, j, k));
                    }
                }
            }
            (vec![3, b, c], idx)
        }
    }
}

fn apply(view: View, t: &Tensor) -> Tensor {
    let [a, b, c] = [t.shape()[0], t.shape()[1], t.shape()[2]];
    match view {
        View::Contiguous => t.clone(),
        View::Transpose => t.transpose(0, 2).unwrap(),
        View::Narrow => t.narrow(1, 1, b as i64 - 1).unwrap(),
        View::Select => t.select(0, a as i64 - 1).unwrap(),
        View::Expand => t
            .narrow(0, 0, 1)
            .unwrap()
            .expand(&[3, b as i64, c as i64])
            .unwrap(),
    }
}

fn view_strategy() -> impl Strategy<Value = View> {
    prop_oneof![
        Just(View::Contiguous),
        Just(View::Transpose),
        Just(View::Narrow),
        Just(View::Select),
        Just(View::Expand),
    ]
}

fn dtype_strategy() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

/// Random little-endian element bytes for `numel` elements of `dtype`
/// (bools 0 or 1; floats any bit pattern, NaN payloads included).
fn random_bytes(dtype: DType, numel: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(numel * dtype.size());
    for _ in 0..numel * dtype.size() {
        out.push(next() as u8);
    }
    if dtype == DType::Bool {
        for b in &mut out {
            *b &= 1;
        }
    }
    out
}

/// The source tensor, the viewed tensor, and the bytes the view must have.
fn case(dtype: DType, dims: [usize; 3], view: View, seed: u64) -> (Tensor, Vec<usize>, Vec<u8>) {
    let n = dims.iter().product::<usize>();
    let bytes = random_bytes(dtype, n, seed);
    let src = Tensor::from_raw_bytes(&bytes, dtype, &dims, CPU).unwrap();
    let viewed = apply(view, &src);
    let (shape, idx) = reference(view, dims);
    let size = dtype.size();
    let expected: Vec<u8> = idx
        .iter()
        .flat_map(|&i| bytes[i * size..(i + 1) * size].iter().copied())
        .collect();
    assert_eq!(viewed.shape(), &shape[..]);
    (viewed, shape, expected)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn raw_bytes_follow_the_view(dtype in dtype_strategy(), a in 1usize..4, b in 1usize..5,
                                 c in 0usize..4, view in view_strategy(), seed: u64) {
        let (t, _, expected) = case(dtype, [a, b, c], view, seed);
        prop_assert_eq!(t.to_raw_bytes().unwrap(), expected);
    }

    #[test]
    fn safetensors_round_trip(dtypes in proptest::collection::vec(dtype_strategy(), 1..4),
                              a in 1usize..4, b in 1usize..5, c in 0usize..4,
                              view in view_strategy(), seed: u64) {
        let mut cases = Vec::new();
        for (k, &d) in dtypes.iter().enumerate() {
            let (t, shape, expected) = case(d, [a, b, c], view, seed.wrapping_add(k as u64));
            cases.push((format!("layer{k}.weight"), t, shape, expected));
        }
        let bytes = interop::safetensors_to_bytes(cases.iter().map(|(n, t, _, _)| (n.as_str(), t))).unwrap();
        let back = interop::safetensors_from_bytes(&bytes, CPU).unwrap();
        prop_assert_eq!(back.len(), cases.len());
        for (name, t, shape, expected) in &cases {
            let l = &back[name];
            prop_assert_eq!(l.dtype(), t.dtype());
            prop_assert_eq!(l.shape(), &shape[..]);
            prop_assert!(l.is_contiguous());
            prop_assert_eq!(&l.to_raw_bytes().unwrap(), expected);
        }
    }

    #[test]
    fn npy_round_trip(dtype in dtype_strategy(), a in 1usize..4, b in 1usize..5, c in 0usize..4,
                      view in view_strategy(), seed: u64) {
        let (t, shape, expected) = case(dtype, [a, b, c], view, seed);
        let bytes = interop::npy_to_bytes(&t);
        if dtype == DType::BF16 {
            prop_assert!(matches!(bytes, Err(TensorError::DType { .. })), "{:?}", bytes);
            return Ok(());
        }
        let bytes = bytes.unwrap();
        prop_assert_eq!(&bytes[..6], b"\x93NUMPY");
        let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        prop_assert_eq!(header_end % 64, 0);
        prop_assert_eq!(&bytes[header_end..], &expected[..]);
        let l = interop::npy_from_bytes(&bytes, CPU).unwrap();
        prop_assert_eq!(l.dtype(), dtype);
        prop_assert_eq!(l.shape(), &shape[..]);
        prop_assert_eq!(l.to_raw_bytes().unwrap(), expected);
    }

    /// Any byte of a valid safetensors file changed, or the file cut short:
    /// a typed error or a file that loads, never a panic.
    #[test]
    fn mutated_safetensors_never_panic(pos in any::<prop::sample::Index>(), byte: u8, cut in any::<prop::sample::Index>(), truncate: bool) {
        let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], CPU).unwrap();
        let m = Tensor::from_slice(&[true, false, true], &[3], CPU).unwrap();
        let mut bytes = interop::safetensors_to_bytes([("w", &w), ("mask", &m)]).unwrap();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(map) = interop::safetensors_from_bytes(&bytes, CPU) {
            for t in map.values() {
                let _ = t.to_raw_bytes().unwrap();
                let _ = format!("{t}");
            }
        }
    }

    /// The same for `.npy`.
    #[test]
    fn mutated_npy_never_panics(pos in any::<prop::sample::Index>(), byte: u8, cut in any::<prop::sample::Index>(), truncate: bool, dtype in dtype_strategy()) {
        prop_assume!(dtype != DType::BF16);
        let t = Tensor::ones(&[2, 3], dtype, CPU).unwrap();
        let mut bytes = interop::npy_to_bytes(&t).unwrap();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(t) = interop::npy_from_bytes(&bytes, CPU) {
            let _ = t.to_raw_bytes().unwrap();
            let _ = format!("{t}");
        }
    }
}

// ----- .npy: NumPy's exact bytes --------------------------------------------

/// What `numpy.save` writes for `np.arange(6, dtype='<f4').reshape(2, 3)`:
/// the magic, version 1.0, header length 118, the dict literal padded with
/// spaces and a newline to 128 bytes in all, then the elements.
fn numpy_f32_2x3() -> Vec<u8> {
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    let mut header = dict.to_string();
    header.push_str(&" ".repeat(118 - dict.len() - 1));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&118u16.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in 0..6 {
        out.extend_from_slice(&(v as f32).to_le_bytes());
    }
    out
}

fn npy_file(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}\n",
        if fortran { "True" } else { "False" }
    );
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn npy_writes_numpys_bytes() {
    let t = Tensor::arange(0.0, 6.0, 1.0, Some(DType::F32), CPU)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    assert_eq!(interop::npy_to_bytes(&t).unwrap(), numpy_f32_2x3());
    let back = interop::npy_from_bytes(&numpy_f32_2x3(), CPU).unwrap();
    assert_eq!(back.shape(), &[2, 3]);
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5.]);
}

#[test]
fn npy_shapes_of_0d_and_1d() {
    let s = Tensor::scalar(7i64, DType::I64, CPU).unwrap();
    let b = interop::npy_to_bytes(&s).unwrap();
    assert!(String::from_utf8_lossy(&b).contains("'shape': (), }"));
    let back = interop::npy_from_bytes(&b, CPU).unwrap();
    assert_eq!(back.shape(), &[] as &[usize]);
    assert_eq!(back.item::<i64>().unwrap(), 7);
    let v = Tensor::from_slice(&[1u8, 2, 3], &[3], CPU).unwrap();
    let b = interop::npy_to_bytes(&v).unwrap();
    assert!(String::from_utf8_lossy(&b)
        .contains("'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"));
}

#[test]
fn npy_fortran_order_is_read_column_major() {
    // np.asfortranarray(np.array([[1, 2, 3], [4, 5, 6]], dtype='<i4')) stores 1 4 2 5 3 6.
    let data: Vec<u8> = [1i32, 4, 2, 5, 3, 6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let t = interop::npy_from_bytes(&npy_file("<i4", true, "(2, 3)", &data), CPU).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    // 3-D: element [i, j, k] at i + 2 j + 4 k.
    let data: Vec<u8> = (0..8i64).flat_map(|v| v.to_le_bytes()).collect();
    let t = interop::npy_from_bytes(&npy_file("<i8", true, "(2, 2, 2)", &data), CPU).unwrap();
    let v = t.to_vec::<i64>().unwrap();
    for i in 0..2 {
        for j in 0..2 {
            for k in 0..2 {
                assert_eq!(v[i * 4 + j * 2 + k], (i + 2 * j + 4 * k) as i64);
            }
        }
    }
}

#[test]
fn npy_big_endian_and_narrow_integers() {
    let data: Vec<u8> = [1.5f64, -2.25]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let t = interop::npy_from_bytes(&npy_file(">f8", false, "(2,)", &data), CPU).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5, -2.25]);
    let data: Vec<u8> = [-300i16, 32767]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let t = interop::npy_from_bytes(&npy_file("<i2", false, "(2,)", &data), CPU).unwrap();
    assert_eq!(
        (t.dtype(), t.to_vec::<i32>().unwrap()),
        (DType::I32, vec![-300, 32767])
    );
    let data: Vec<u8> = [-300i16, 32767]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let t = interop::npy_from_bytes(&npy_file(">i2", false, "(2,)", &data), CPU).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![-300, 32767]);
    let t =
        interop::npy_from_bytes(&npy_file("|i1", false, "(3,)", &[0xff, 0x80, 5]), CPU).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![-1, -128, 5]);
    let t = interop::npy_from_bytes(&npy_file("<u2", false, "(1,)", &[0xff, 0xff]), CPU).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![65535]);
    let t = interop::npy_from_bytes(&npy_file("<f2", false, "(1,)", &[0x00, 0x3c]), CPU).unwrap();
    assert_eq!(t.to_vec::<half::f16>().unwrap(), vec![half::f16::ONE]);
    // Bool bytes other than 0/1 read as true (NumPy's view of them).
    let t = interop::npy_from_bytes(&npy_file("|b1", false, "(3,)", &[0, 1, 2]), CPU).unwrap();
    assert_eq!(t.to_vec::<bool>().unwrap(), vec![false, true, true]);
}

#[test]
fn npy_versions_2_and_3() {
    let dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n";
    for major in [2u8, 3] {
        let mut b = vec![0x93, b'N', b'U', b'M', b'P', b'Y', major, 0];
        b.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b.extend_from_slice(&42i32.to_le_bytes());
        assert_eq!(
            interop::npy_from_bytes(&b, CPU)
                .unwrap()
                .to_vec::<i32>()
                .unwrap(),
            vec![42]
        );
    }
}

fn format_err<T: std::fmt::Debug>(r: Result<T, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Format { .. }) => e.to_string(),
        other => panic!("expected a Format error, got {other:?}"),
    }
}

#[test]
fn hostile_npy_files_are_typed_errors() {
    let good = numpy_f32_2x3();
    // Not a .npy file, or cut inside the preamble.
    for b in [
        &b""[..],
        &b"\x93NUM"[..],
        &b"PK\x03\x04zipfile"[..],
        &good[..9],
    ] {
        format_err(interop::npy_from_bytes(b, CPU));
    }
    // Unknown version.
    let mut b = good.clone();
    b[6] = 9;
    assert!(format_err(interop::npy_from_bytes(&b, CPU)).contains("version 9.0"));
    // A header length past the end of the file, and a huge one.
    let mut b = good.clone();
    b[8..10].copy_from_slice(&60000u16.to_le_bytes());
    format_err(interop::npy_from_bytes(&b, CPU));
    let mut b = vec![0x93, b'N', b'U', b'M', b'P', b'Y', 2, 0];
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(format_err(interop::npy_from_bytes(&b, CPU)).contains("more than"));
    // Data shorter or longer than the shape needs.
    format_err(interop::npy_from_bytes(&good[..good.len() - 1], CPU));
    let mut long = good.clone();
    long.push(0);
    format_err(interop::npy_from_bytes(&long, CPU));
    // A shape whose element count overflows: SizeOverflow before any allocation.
    let b = npy_file("<f4", false, "(4294967296, 4294967296)", &[]);
    assert!(matches!(
        interop::npy_from_bytes(&b, CPU),
        Err(TensorError::SizeOverflow { .. })
    ));
    let b = npy_file("<f8", false, "(4611686018427387904,)", &[]);
    assert!(matches!(
        interop::npy_from_bytes(&b, CPU),
        Err(TensorError::SizeOverflow { .. })
    ));
    // A size beyond u64.
    format_err(interop::npy_from_bytes(
        &npy_file("<f4", false, "(99999999999999999999999,)", &[]),
        CPU,
    ));
    // dtypes strata cannot hold.
    for d in ["<c8", "<u8", "<u4", "|O", "<M8[ns]", "|S3", "<f16"] {
        let r = interop::npy_from_bytes(&npy_file(d, false, "(1,)", &[0; 16]), CPU);
        assert!(matches!(r, Err(TensorError::DType { .. })), "{d}: {r:?}");
    }
    // Malformed dict literals.
    for shape in ["(2, 3", "[2, 3]", "(-1,)", "(2,,3)", "(a,)"] {
        format_err(interop::npy_from_bytes(
            &npy_file("<f4", false, shape, &[0; 24]),
            CPU,
        ));
    }
}

#[test]
fn npy_refuses_bf16() {
    let t = Tensor::ones(&[2], DType::BF16, CPU).unwrap();
    let e = interop::npy_to_bytes(&t).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }));
    assert!(e.to_string().contains("bfloat16"));
}

// ----- safetensors ------------------------------------------------------------

/// A safetensors file from a header written by hand (the format's spec:
/// 8-byte little-endian header length, JSON header, data).
fn st_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn safetensors_reads_a_hand_written_file() {
    // As `safetensors.torch.save_file({"a": torch.tensor([[1, 2], [3, 4]], dtype=torch.int16),
    //  "b": torch.tensor([1.5], dtype=torch.bfloat16)})` lays it out.
    let mut data = Vec::new();
    for v in [1i16, 2, 3, 4] {
        data.extend_from_slice(&v.to_le_bytes());
    }
    data.extend_from_slice(&half::bf16::from_f32(1.5).to_bits().to_le_bytes());
    let f = st_file(
        r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"I16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]}}"#,
        &data,
    );
    let m = interop::safetensors_from_bytes(&f, CPU).unwrap();
    assert_eq!(m["a"].dtype(), DType::I32, "I16 is widened to i32");
    assert_eq!(m["a"].shape(), &[2, 2]);
    assert_eq!(m["a"].to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(
        m["b"].to_vec::<half::bf16>().unwrap(),
        vec![half::bf16::from_f32(1.5)]
    );
}

#[test]
fn hostile_safetensors_files_are_typed_errors() {
    let fmt = |b: &[u8]| format_err(interop::safetensors_from_bytes(b, CPU));
    fmt(&b""[..]);
    fmt(&b"\x05\x00\x00\x00"[..]);
    fmt(&u64::MAX.to_le_bytes());
    fmt(&st_file("not json", &[]));
    fmt(&st_file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &[0; 7],
    ));
    fmt(&st_file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
        &[0; 4],
    ));
    fmt(&st_file(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
        &[0; 8],
    ));
    fmt(&st_file(
        r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#,
        &[],
    ));
    fmt(&st_file(
        r#"{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}}"#,
        &[0],
    ));
    // Sizes whose product overflows before the 0 (the safetensors crate's check).
    fmt(&st_file(
        r#"{"a":{"dtype":"F32","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]}}"#,
        &[],
    ));
    // Sizes whose product is 0 within usize but whose contiguous strides
    // exceed i64::MAX (2^62 * 4): strata's check, before any allocation.
    let r = interop::safetensors_from_bytes(
        &st_file(
            r#"{"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}}"#,
            &[],
        ),
        CPU,
    );
    assert!(matches!(r, Err(TensorError::SizeOverflow { .. })), "{r:?}");
    // [2^62, 2, 0] has strides [2, 1, 1]: an empty tensor PyTorch makes too
    // (torch.empty(2**62, 2, 0); session 38).
    let r = interop::safetensors_from_bytes(
        &st_file(
            r#"{"a":{"dtype":"F32","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}}"#,
            &[],
        ),
        CPU,
    )
    .unwrap();
    assert_eq!(r["a"].shape(), &[1 << 62, 2, 0]);
    // dtypes strata does not have.
    for d in ["F8_E4M3", "U64", "C64", "F4"] {
        let h = format!(
            r#"{{"a":{{"dtype":"{d}","shape":[2],"data_offsets":[0,{}]}}}}"#,
            if d == "F4" {
                1
            } else if d == "F8_E4M3" {
                2
            } else {
                16
            }
        );
        let n = if d == "F4" {
            1
        } else if d == "F8_E4M3" {
            2
        } else {
            16
        };
        let r = interop::safetensors_from_bytes(&st_file(&h, &vec![0; n]), CPU);
        assert!(matches!(r, Err(TensorError::DType { .. })), "{d}: {r:?}");
    }
    // Bool bytes other than 0/1 are normalised, not undefined behaviour.
    let m = interop::safetensors_from_bytes(
        &st_file(
            r#"{"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}"#,
            &[0, 7, 1],
        ),
        CPU,
    )
    .unwrap();
    assert_eq!(m["m"].to_vec::<bool>().unwrap(), vec![false, true, true]);
}

#[test]
fn safetensors_names_are_checked_before_writing() {
    let t = Tensor::ones(&[2], DType::F32, CPU).unwrap();
    let dup = interop::safetensors_to_bytes([("w", &t), ("w", &t)]);
    assert!(matches!(dup, Err(TensorError::Value { .. })));
    let meta = interop::safetensors_to_bytes([("__metadata__", &t)]);
    assert!(matches!(meta, Err(TensorError::Value { .. })));
}

#[test]
fn files_on_disk_and_io_errors() {
    let dir = std::env::temp_dir().join(format!("strata-interop-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = Tensor::randn(&[4, 3], DType::F32, 1, CPU).unwrap();
    let b = Tensor::arange(0.0, 3.0, 1.0, Some(DType::I64), CPU).unwrap();
    let mut params = HashMap::new();
    params.insert("fc.weight".to_string(), w.t().unwrap());
    params.insert("fc.bias".to_string(), b.clone());
    let st = dir.join("model.safetensors");
    interop::save_safetensors(&st, &params).unwrap();
    let back = interop::load_safetensors(&st, CPU).unwrap();
    assert!(back["fc.weight"].equal(&w.t().unwrap()).unwrap());
    assert!(back["fc.bias"].equal(&b).unwrap());
    let npy = dir.join("w.npy");
    interop::save_npy(&npy, &w).unwrap();
    assert!(interop::load_npy(&npy, CPU).unwrap().equal(&w).unwrap());
    // Missing files and unwritable paths name the file.
    let missing = dir.join("missing.safetensors");
    let e = interop::load_safetensors(&missing, CPU).unwrap_err();
    assert!(
        matches!(e, TensorError::Io { .. }) && e.to_string().contains("missing.safetensors"),
        "{e}"
    );
    let e = interop::load_npy(dir.join("missing.npy"), CPU).unwrap_err();
    assert!(matches!(e, TensorError::Io { .. }));
    let e = interop::save_npy(dir.join("no/such/dir/x.npy"), &w).unwrap_err();
    assert!(matches!(e, TensorError::Io { .. }));
    let e =
        interop::save_safetensors(dir.join("no/such/dir/x.safetensors"), [("w", &w)]).unwrap_err();
    assert!(matches!(e, TensorError::Io { .. }), "{e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ----- ndarray -----------------------------------------------------------------

#[cfg(feature = "ndarray")]
mod with_ndarray {
    use super::*;
    use ndarray::{s, Array, ArrayD, IxDyn};

    #[test]
    fn arrays_of_every_layout_convert() {
        let a = Array::from_shape_fn((3, 4, 2), |(i, j, k)| (i * 100 + j * 10 + k) as i64);
        let views = [
            a.view().into_dyn(),
            a.t().into_dyn(),
            a.slice(s![..;-1, 1..3, ..]).into_dyn(),
            a.slice(s![.., ..;2, 1]).into_dyn(),
            a.view().permuted_axes([1, 0, 2]).into_dyn(),
        ];
        for v in views {
            let t = Tensor::from_ndarray(&v, CPU).unwrap();
            assert_eq!(t.shape(), v.shape());
            let got = t.to_vec::<i64>().unwrap();
            let want: Vec<i64> = v.iter().copied().collect();
            assert_eq!(got, want);
            let back: ArrayD<i64> = (&t).try_into().unwrap();
            assert_eq!(back, v);
        }
    }

    #[test]
    fn tensors_of_every_layout_convert() {
        let t = Tensor::arange(0.0, 24.0, 1.0, Some(DType::F32), CPU)
            .unwrap()
            .reshape(&[2, 3, 4])
            .unwrap();
        let tt = t.transpose(0, 2).unwrap();
        let a: ArrayD<f32> = tt.clone().try_into().unwrap();
        assert_eq!(a.shape(), &[4, 3, 2]);
        for i in 0..4 {
            for j in 0..3 {
                for k in 0..2 {
                    assert_eq!(a[IxDyn(&[i, j, k])], (k * 12 + j * 4 + i) as f32);
                }
            }
        }
        let wrong: Result<ArrayD<f64>, _> = (&tt).try_into();
        assert!(matches!(wrong, Err(TensorError::DType { .. })));
        // Every element type.
        let h = Array::from_vec(vec![half::bf16::from_f32(2.5), half::bf16::from_f32(-1.0)]);
        assert_eq!(Tensor::try_from(h).unwrap().dtype(), DType::BF16);
        let b = Tensor::try_from(&Array::from_vec(vec![true, false]).into_dyn()).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false]);
        let z = Tensor::try_from(Array::<u8, _>::zeros((0, 3))).unwrap();
        assert_eq!(z.shape(), &[0, 3]);
    }
}

// ----- GPU --------------------------------------------------------------------

/// safetensors and `.npy` from and to `cuda:0`: the bytes read back from the
/// GPU equal the CPU's.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gpu_round_trips() {
    let gpu = Device::Cuda(0);
    assert!(
        strata_tensor::has_backend(gpu),
        "this test needs a CUDA GPU"
    );
    for (k, &d) in DType::ALL.iter().enumerate() {
        let (t, shape, expected) = case(d, [3, 4, 5], View::Transpose, 7 + k as u64);
        let g = t
            .to(gpu)
            .unwrap()
            .transpose(0, 1)
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let bytes = interop::safetensors_to_bytes([("t", &g)]).unwrap();
        let back = interop::safetensors_from_bytes(&bytes, gpu).unwrap();
        assert_eq!(back["t"].device(), gpu);
        assert_eq!(back["t"].shape(), &shape[..]);
        assert_eq!(back["t"].to_raw_bytes().unwrap(), expected, "{d}");
        if d != DType::BF16 {
            let n = interop::npy_from_bytes(&interop::npy_to_bytes(&g).unwrap(), gpu).unwrap();
            assert_eq!(n.to_raw_bytes().unwrap(), expected, "{d}");
        }
    }
}
