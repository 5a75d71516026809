//! NCCL: finding and loading the library, communicators and the collective
//! calls behind `crate::distributed`.
//!
//! # Finding the library
//!
//! cudarc's NCCL loader dlopens the bare names `libnccl.so`, `libnccl.so.13`,
//! `.12`, ... and panics when none loads; NCCL's own SONAME, `libnccl.so.2`
//! (the only file in PyTorch's `site-packages/nvidia/nccl/lib`), is not among
//! them. So this module uses cudarc's NCCL *types* (`cudarc::nccl::sys`) but
//! resolves the few entry points it calls itself, from the first of:
//!
//! 1. `$STRATA_NCCL_LIBRARY`: the library file, or a folder holding
//!    `libnccl.so.2` / `libnccl.so`;
//! 2. `libnccl.so.2` / `libnccl.so` in the folders `nvrtc::search_dirs` lists
//!    (`LD_LIBRARY_PATH`, the CUDA toolkit, and the `nvidia/nccl/lib` folders of
//!    the usual Python environments, `/opt/torch/.venv` among them);
//! 3. the loader path (`libnccl.so.2`, then `libnccl.so`).
//!
//! When none loads, every collective fails with
//! `TensorError::BackendUnavailable` naming what was searched; nothing panics.
//! Status codes are read as plain integers, so a library newer than the
//! bindings cannot hand back an enum value Rust does not know.
//!
//! Before the library is first loaded, `NCCL_NVLS_ENABLE=0` is set unless the
//! user set it: NVLink multicast (NVLS) can take a shared host's GPUs out of
//! service.

use super::context::{cu_stream, failure, CudaDevice};
use super::libraries::{candidates, symbol};
use crate::distributed::CollectiveCall;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::OnceLock;
use strata_alloc::{Device, StreamId};

/// The environment variable naming the NCCL library (a file or a folder).
pub(crate) const LIBRARY_VAR: &str = "STRATA_NCCL_LIBRARY";

/// NCCL's status code as returned (0 is success).
type Status = u32;

type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> Status;
type GetUniqueIdFn = unsafe extern "C" fn(*mut ncclUniqueId) -> Status;
type CommInitRankFn = unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> Status;
type CommInitAllFn = unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> Status;
type CommDestroyFn = unsafe extern "C" fn(ncclComm_t) -> Status;
type GetErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;
type GroupFn = unsafe extern "C" fn() -> Status;
type AllReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    cudaStream_t,
) -> Status;
type BroadcastFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    c_int,
    ncclComm_t,
    cudaStream_t,
) -> Status;
type AllGatherFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclComm_t,
    cudaStream_t,
) -> Status;

/// The loaded library and the entry points strata calls.
struct Nccl {
    /// Kept loaded for the life of the process (the pointers below point into it).
    _lib: libloading::Library,
    path: String,
    get_version: GetVersionFn,
    get_unique_id: GetUniqueIdFn,
    comm_init_rank: CommInitRankFn,
    comm_init_all: CommInitAllFn,
    comm_destroy: CommDestroyFn,
    get_error_string: GetErrorStringFn,
    group_start: GroupFn,
    group_end: GroupFn,
    all_reduce: AllReduceFn,
    broadcast: BroadcastFn,
    all_gather: AllGatherFn,
    reduce_scatter: AllReduceFn,
}

fn load(path: &Path) -> std::result::Result<Nccl, String> {
    // SAFETY: loading NCCL runs its initialisers, which have no preconditions;
    // the handle is stored in a process-wide `OnceLock` and never dropped.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY (each `symbol` call): the types above are NCCL 2.x's signatures
    // from `nccl.h` (status codes read as `u32`).
    unsafe {
        Ok(Nccl {
            get_version: symbol(&lib, path, "ncclGetVersion")?,
            get_unique_id: symbol(&lib, path, "ncclGetUniqueId")?,
            comm_init_rank: symbol(&lib, path, "ncclCommInitRank")?,
            comm_init_all: symbol(&lib, path, "ncclCommInitAll")?,
            comm_destroy: symbol(&lib, path, "ncclCommDestroy")?,
            get_error_string: symbol(&lib, path, "ncclGetErrorString")?,
            group_start: symbol(&lib, path, "ncclGroupStart")?,
            group_end: symbol(&lib, path, "ncclGroupEnd")?,
            all_reduce: symbol(&lib, path, "ncclAllReduce")?,
            broadcast: symbol(&lib, path, "ncclBroadcast")?,
            all_gather: symbol(&lib, path, "ncclAllGather")?,
            reduce_scatter: symbol(&lib, path, "ncclReduceScatter")?,
            path: path.display().to_string(),
            _lib: lib,
        })
    }
}

/// The library, loaded once per process, or why it could not be.
fn nccl() -> std::result::Result<&'static Nccl, String> {
    static LIB: OnceLock<std::result::Result<Nccl, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
            // NCCL reads this when a communicator is created, which cannot have
            // happened before the library is loaded here.
            std::env::set_var("NCCL_NVLS_ENABLE", "0");
        }
        let (cands, searched) = candidates(LIBRARY_VAR, &["libnccl.so.2", "libnccl.so"]);
        let mut tried = Vec::new();
        for c in &cands {
            match load(c) {
                Ok(n) => return Ok(n),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "the NCCL library (libnccl.so.2) was not found: searched {searched} (tried: {}); \
             install NCCL or point {LIBRARY_VAR} at libnccl.so.2 (PyTorch ships it in \
             site-packages/nvidia/nccl/lib)",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn lib(device: Device) -> Result<&'static Nccl> {
    nccl().map_err(|reason| TensorError::BackendUnavailable { device, reason })
}

/// Why NCCL cannot be used, or `None` when the library loaded.
pub(crate) fn nccl_unavailable_reason() -> Option<String> {
    nccl().err()
}

/// The loaded library's path.
pub(crate) fn nccl_library_path() -> Option<String> {
    nccl().ok().map(|n| n.path.clone())
}

fn check(n: &Nccl, device: Device, call: &'static str, s: Status) -> Result<()> {
    if s == 0 {
        return Ok(());
    }
    // SAFETY: ncclGetErrorString returns a pointer to a static C string (or
    // null) for any code.
    let p = unsafe { (n.get_error_string)(s) };
    let text = if p.is_null() {
        format!("NCCL status {s}")
    } else {
        // SAFETY: non-null, NUL-terminated, static.
        let t = unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy();
        format!("NCCL status {s}: {t}")
    };
    Err(failure(device, call, text))
}

/// NCCL's version code (e.g. 22707 for 2.27.7).
pub(crate) fn nccl_version() -> Result<i32> {
    let n = lib(Device::Cuda(0))?;
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid out-pointer.
    check(n, Device::Cuda(0), "ncclGetVersion", unsafe {
        (n.get_version)(&mut v)
    })?;
    Ok(v)
}

/// A fresh unique id (rank 0 makes it and shares its bytes).
pub(crate) fn nccl_unique_id() -> Result<[u8; 128]> {
    let n = lib(Device::Cuda(0))?;
    let mut id = ncclUniqueId { internal: [0; 128] };
    // SAFETY: `id` is a valid out-pointer of the right size.
    check(n, Device::Cuda(0), "ncclGetUniqueId", unsafe {
        (n.get_unique_id)(&mut id)
    })?;
    Ok(id.internal.map(|c| c as u8))
}

/// A communicator handle (owned by `crate::distributed::Communicator`, which
/// destroys it once).
#[derive(Debug)]
pub(crate) struct RawComm(ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread as long as calls on
// it are not concurrent; `distributed::Communicator` serialises them.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// One communicator per GPU of `ordinals`, created together (ncclCommInitAll).
pub(crate) fn nccl_init_all(ordinals: &[usize]) -> Result<Vec<RawComm>> {
    let first = Device::Cuda(ordinals.first().copied().unwrap_or(0));
    let n = lib(first)?;
    for &o in ordinals {
        CudaDevice::get(o)?.bind()?;
    }
    let devs: Vec<c_int> = ordinals.iter().map(|&o| o as c_int).collect();
    let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); ordinals.len()];
    // SAFETY: `comms` and `devs` hold `ordinals.len()` elements each; every
    // ordinal is an opened device.
    check(n, first, "ncclCommInitAll", unsafe {
        (n.comm_init_all)(comms.as_mut_ptr(), devs.len() as c_int, devs.as_ptr())
    })?;
    Ok(comms.into_iter().map(RawComm).collect())
}

/// The communicator of `rank` among `world` ranks sharing `id`, on `ordinal`.
pub(crate) fn nccl_init_rank(
    ordinal: usize,
    world: usize,
    rank: usize,
    id: &[u8; 128],
) -> Result<RawComm> {
    let device = Device::Cuda(ordinal);
    let n = lib(device)?;
    // NCCL takes the calling thread's current device.
    CudaDevice::get(ordinal)?.bind()?;
    let id = ncclUniqueId {
        internal: id.map(|b| b as c_char),
    };
    let mut comm: ncclComm_t = std::ptr::null_mut();
    // SAFETY: `comm` is a valid out-pointer; the id is passed by value.
    check(n, device, "ncclCommInitRank", unsafe {
        (n.comm_init_rank)(&mut comm, world as c_int, id, rank as c_int)
    })?;
    Ok(RawComm(comm))
}

/// Destroys `comm` (called once, by its owner's drop).
pub(crate) fn nccl_destroy(device: Device, comm: &RawComm) {
    if let Ok(n) = lib(device) {
        // SAFETY: the communicator is live and destroyed once; its owner
        // synchronised nothing is left in flight that it must outlive
        // (ncclCommDestroy itself waits for queued work).
        let _ = unsafe { (n.comm_destroy)(comm.0) };
    }
}

/// `ncclGroupStart`.
pub(crate) fn nccl_group_start() -> Result<()> {
    let n = lib(Device::Cuda(0))?;
    // SAFETY: no arguments.
    check(n, Device::Cuda(0), "ncclGroupStart", unsafe {
        (n.group_start)()
    })
}

/// `ncclGroupEnd`.
pub(crate) fn nccl_group_end() -> Result<()> {
    let n = lib(Device::Cuda(0))?;
    // SAFETY: no arguments.
    check(n, Device::Cuda(0), "ncclGroupEnd", unsafe {
        (n.group_end)()
    })
}

fn nccl_dtype(d: DType) -> ncclDataType_t {
    match d {
        DType::F32 => ncclDataType_t::ncclFloat32,
        DType::F64 => ncclDataType_t::ncclFloat64,
        DType::F16 => ncclDataType_t::ncclFloat16,
        DType::BF16 => ncclDataType_t::ncclBfloat16,
        DType::I32 => ncclDataType_t::ncclInt32,
        DType::I64 => ncclDataType_t::ncclInt64,
        DType::U8 | DType::Bool => ncclDataType_t::ncclUint8,
    }
}

fn nccl_op(op: crate::distributed::ReduceOp) -> ncclRedOp_t {
    use crate::distributed::ReduceOp;
    match op {
        ReduceOp::Sum => ncclRedOp_t::ncclSum,
        ReduceOp::Avg => ncclRedOp_t::ncclAvg,
        ReduceOp::Max => ncclRedOp_t::ncclMax,
    }
}

/// Queues `call` on stream `s` of `device` with `comm`. The caller checked
/// the arguments (devices, dtypes, sizes, contiguity) and keeps the buffers
/// alive until the stream has run the call.
pub(crate) fn nccl_collective(
    device: Device,
    comm: &RawComm,
    call: &CollectiveCall,
    s: StreamId,
) -> Result<()> {
    let n = lib(device)?;
    let d = match device {
        Device::Cuda(o) => CudaDevice::get(o)?,
        other => {
            return Err(TensorError::value(
                "collective",
                format!("{other} is not a CUDA device"),
            ))
        }
    };
    d.bind()?;
    let stream = cu_stream(s) as cudaStream_t;
    let ptr = |p: u64| p as usize as *mut c_void;
    // SAFETY (each call): the pointers are device addresses of live storages
    // of `device` covering `count` elements (checked by the caller), the
    // communicator is live and calls on it are serialised by its owner, and
    // the stream belongs to `device`.
    let (name, status) = unsafe {
        match *call {
            CollectiveCall::AllReduce {
                send,
                recv,
                count,
                dtype,
                op,
            } => (
                "ncclAllReduce",
                (n.all_reduce)(
                    ptr(send),
                    ptr(recv),
                    count,
                    nccl_dtype(dtype),
                    nccl_op(op),
                    comm.0,
                    stream,
                ),
            ),
            CollectiveCall::Broadcast {
                send,
                recv,
                count,
                dtype,
                root,
            } => (
                "ncclBroadcast",
                (n.broadcast)(
                    ptr(send),
                    ptr(recv),
                    count,
                    nccl_dtype(dtype),
                    root as c_int,
                    comm.0,
                    stream,
                ),
            ),
            CollectiveCall::AllGather {
                send,
                recv,
                send_count,
                dtype,
            } => (
                "ncclAllGather",
                (n.all_gather)(
                    ptr(send),
                    ptr(recv),
                    send_count,
                    nccl_dtype(dtype),
                    comm.0,
                    stream,
                ),
            ),
            CollectiveCall::ReduceScatter {
                send,
                recv,
                recv_count,
                dtype,
                op,
            } => (
                "ncclReduceScatter",
                (n.reduce_scatter)(
                    ptr(send),
                    ptr(recv),
                    recv_count,
                    nccl_dtype(dtype),
                    nccl_op(op),
                    comm.0,
                    stream,
                ),
            ),
        }
    };
    check(n, device, name, status)
}
