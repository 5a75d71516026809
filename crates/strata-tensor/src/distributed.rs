//! Collectives across GPUs through NCCL: communicators, `all_reduce`,
//! `broadcast`, `all_gather` and `reduce_scatter` on tensors.
//!
//! A [`Communicator`] is one rank's handle: its GPU, its rank, the world
//! size, and a *communication stream* of its own. A collective
//!
//! 1. makes the communication stream wait for the work queued so far on the
//!    calling thread's current stream of the GPU (an event),
//! 2. queues the NCCL call on the communication stream,
//! 3. marks every buffer with [`Tensor::record_stream`] for the communication
//!    stream, so the caching allocator cannot hand its memory out again before
//!    NCCL has finished with it, even if the tensor is dropped, and
//! 4. returns a [`Work`] whose [`Work::wait`] makes the current stream wait for
//!    the collective (the host does not block), as PyTorch's `work.wait()`.
//!
//! Communicators for the GPUs of one process are created together with
//! [`Communicator::for_devices`]; several processes each call
//! [`Communicator::init_rank`] with a [`UniqueId`] made by rank 0 and sent to
//! the others as bytes. One thread driving several GPUs must issue their
//! collectives inside [`group`] (NCCL's `ncclGroupStart`/`ncclGroupEnd`).
//!
//! NCCL is loaded when first needed; see `docs/distributed.md` for where it is
//! looked for (`STRATA_NCCL_LIBRARY`, `LD_LIBRARY_PATH`, PyTorch's
//! `site-packages/nvidia/nccl/lib`). Without it, or without the `cuda`
//! feature, every call here returns [`TensorError::BackendUnavailable`]
//! saying what is missing. `NCCL_NVLS_ENABLE=0` is set before NCCL loads
//! unless the user set it.

use crate::backend::gpu;
use crate::cuda::{self, Event, Stream};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::Arc;
use strata_alloc::Device;

/// How a reduction combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The mean (the sum divided by the world size); float dtypes only.
    Avg,
    /// The maximum.
    Max,
}

/// One NCCL call as the backend issues it (addresses of checked, live,
/// contiguous buffers).
#[derive(Clone, Copy, Debug)]
// Read only by the CUDA backend (builds without it never issue a call).
#[allow(dead_code)]
pub(crate) enum CollectiveCall {
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        op: ReduceOp,
    },
    Broadcast {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        root: usize,
    },
    AllGather {
        send: u64,
        recv: u64,
        send_count: usize,
        dtype: DType,
    },
    ReduceScatter {
        send: u64,
        recv: u64,
        recv_count: usize,
        dtype: DType,
        op: ReduceOp,
    },
}

/// Why NCCL cannot be used here, or `None` when the library loaded.
pub fn nccl_unavailable_reason() -> Option<String> {
    gpu::nccl_unavailable_reason()
}

/// Whether NCCL could be loaded.
pub fn nccl_available() -> bool {
    nccl_unavailable_reason().is_none()
}

/// The path NCCL was loaded from, once loaded.
pub fn nccl_library_path() -> Option<String> {
    gpu::nccl_library_path()
}

/// NCCL's version as (major, minor, patch).
pub fn nccl_version() -> Result<(u32, u32, u32)> {
    let code = gpu::nccl_version()?.max(0) as u32;
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch, older ones *1000 + *100.
    Ok(if code >= 20900 {
        (code / 10000, (code % 10000) / 100, code % 100)
    } else {
        (code / 1000, (code % 1000) / 100, code % 100)
    })
}

/// The id that the ranks of one communicator share (NCCL's `ncclUniqueId`):
/// made by one rank, sent to the others as bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId([u8; UniqueId::BYTES]);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}..)", &self.0[..8])
    }
}

impl UniqueId {
    /// Size of the id in bytes.
    pub const BYTES: usize = 128;

    /// A fresh id (`ncclGetUniqueId`; it opens a bootstrap socket on this host).
    pub fn new() -> Result<UniqueId> {
        Ok(UniqueId(gpu::nccl_unique_id()?))
    }

    /// The id's bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; UniqueId::BYTES] {
        &self.0
    }

    /// The id from bytes made by [`UniqueId::as_bytes`]; a typed error for a
    /// length other than [`UniqueId::BYTES`].
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let arr: [u8; UniqueId::BYTES] = bytes.try_into().map_err(|_| {
            TensorError::value(
                "UniqueId::from_bytes",
                format!(
                    "an NCCL unique id has {} bytes, got {}",
                    UniqueId::BYTES,
                    bytes.len()
                ),
            )
        })?;
        Ok(UniqueId(arr))
    }
}

/// A queued collective. Dropping it does not wait; the buffers stay safe
/// because they were recorded on the communication stream.
#[derive(Debug)]
pub struct Work {
    device: Device,
    done: Option<Arc<Event>>,
    _keep: Vec<Tensor>,
}

impl Work {
    /// Makes the calling thread's current stream of the device wait for the
    /// collective (PyTorch's `work.wait()`); the host does not block. Call it
    /// after the enclosing [`group`] ended.
    pub fn wait(&self) -> Result<()> {
        match &self.done {
            Some(e) => cuda::current_stream(self.device)?.wait_event(e),
            None => Ok(()),
        }
    }

    /// Blocks the host until the collective has run.
    pub fn synchronize(&self) -> Result<()> {
        match &self.done {
            Some(e) => e.synchronize(),
            None => Ok(()),
        }
    }

    /// Whether the collective has run (non-blocking).
    pub fn is_completed(&self) -> Result<bool> {
        match &self.done {
            Some(e) => e.query(),
            None => Ok(true),
        }
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }
}

/// Collectives queued inside a [`group`] on this thread: their events are
/// recorded once `ncclGroupEnd` has queued the kernels.
type GroupPending = Vec<(Stream, Arc<Event>, Vec<Tensor>)>;

thread_local! {
    static GROUP: RefCell<Option<GroupPending>> = const { RefCell::new(None) };
}

/// Runs `f` inside one NCCL group (`ncclGroupStart` ... `ncclGroupEnd`): how
/// one thread issues the collectives of several GPUs of its process (each
/// rank's call would otherwise wait for the others). Groups do not nest.
pub fn group<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    if GROUP.with(|g| g.borrow().is_some()) {
        return Err(TensorError::value(
            "distributed::group",
            "groups do not nest (this thread is already inside one)",
        ));
    }
    gpu::nccl_group_start()?;
    GROUP.with(|g| *g.borrow_mut() = Some(Vec::new()));
    let r = f();
    let pending = GROUP.with(|g| g.borrow_mut().take()).unwrap_or_default();
    let end = gpu::nccl_group_end();
    let r = r?;
    end?;
    for (stream, event, _keep) in pending {
        event.record(&stream)?;
    }
    Ok(r)
}

/// One rank of an NCCL communicator, on one GPU. See the module docs.
pub struct Communicator {
    device: Device,
    rank: usize,
    world: usize,
    stream: Stream,
    /// The handle; locked while a call is issued (NCCL calls on one
    /// communicator must not be concurrent).
    raw: Mutex<gpu::RawComm>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("device", &self.device)
            .field("rank", &self.rank)
            .field("world_size", &self.world)
            .finish()
    }
}

/// The ordinal of a CUDA device that exists, or a typed error.
fn gpu_ordinal(op: &'static str, device: Device) -> Result<usize> {
    match device {
        Device::Cuda(n) => {
            let count = cuda::device_count();
            if n >= count {
                return Err(TensorError::BackendUnavailable {
                    device,
                    reason: format!(
                        "{op} needs {device}, but {count} GPU(s) are visible{}",
                        cuda::unavailable_reason()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    ),
                });
            }
            Ok(n)
        }
        other => Err(TensorError::value(
            op,
            format!("NCCL collectives run on CUDA devices, not {other}"),
        )),
    }
}

impl Communicator {
    /// One communicator per device, ranks in the order given, created
    /// together (`ncclCommInitAll`) for one process driving several GPUs
    /// (from one thread inside [`group`], or one thread per GPU).
    ///
    /// Typed errors: no devices, a device given twice, a CPU device, a GPU
    /// that is not there, NCCL missing.
    pub fn for_devices(devices: &[Device]) -> Result<Vec<Communicator>> {
        const OP: &str = "Communicator::for_devices";
        if devices.is_empty() {
            return Err(TensorError::value(OP, "no devices given"));
        }
        let mut ordinals = Vec::with_capacity(devices.len());
        for &d in devices {
            let o = gpu_ordinal(OP, d)?;
            if ordinals.contains(&o) {
                return Err(TensorError::value(OP, format!("{d} is given twice")));
            }
            ordinals.push(o);
        }
        if let Some(reason) = nccl_unavailable_reason() {
            return Err(TensorError::BackendUnavailable {
                device: devices[0],
                reason,
            });
        }
        let streams = devices
            .iter()
            .map(|&d| Stream::new(d))
            .collect::<Result<Vec<_>>>()?;
        let raws = gpu::nccl_init_all(&ordinals)?;
        let world = devices.len();
        Ok(raws
            .into_iter()
            .zip(streams)
            .enumerate()
            .map(|(rank, (raw, stream))| Communicator {
                device: stream.device(),
                rank,
                world,
                stream,
                raw: Mutex::new(raw),
            })
            .collect())
    }

    /// Rank `rank` of `world_size` ranks (in this or other processes) that
    /// share `id`, on `device`. Blocks until every rank has joined.
    ///
    /// Typed errors: a rank not below `world_size`, a world of more than
    /// `i32::MAX` ranks (NCCL's limit), a CPU device, NCCL missing.
    pub fn init_rank(
        device: Device,
        rank: usize,
        world_size: usize,
        id: &UniqueId,
    ) -> Result<Communicator> {
        const OP: &str = "Communicator::init_rank";
        if world_size == 0 || rank >= world_size {
            return Err(TensorError::value(
                OP,
                format!("rank {rank} is not within a world of {world_size}"),
            ));
        }
        // NCCL counts ranks in a C int: a larger world would be passed
        // wrapped (2^32 + 2 ranks as 2).
        if i32::try_from(world_size).is_err() {
            return Err(TensorError::value(
                OP,
                format!(
                    "a world of {world_size} ranks is more than NCCL can address ({}, i32::MAX)",
                    i32::MAX
                ),
            ));
        }
        let o = gpu_ordinal(OP, device)?;
        if let Some(reason) = nccl_unavailable_reason() {
            return Err(TensorError::BackendUnavailable { device, reason });
        }
        let stream = Stream::new(device)?;
        let raw = gpu::nccl_init_rank(o, world_size, rank, &id.0)?;
        Ok(Communicator {
            device,
            rank,
            world: world_size,
            stream,
            raw: Mutex::new(raw),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The GPU.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The communication stream collectives run on.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// Reduces `tensor` across ranks in place (every rank gets the result).
    pub fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "all_reduce";
        self.check_tensor(OP, tensor, true)?;
        check_reduce(OP, tensor.dtype(), op)?;
        let p = dev_ptr(tensor);
        self.issue(
            CollectiveCall::AllReduce {
                send: p,
                recv: p,
                count: tensor.numel(),
                dtype: tensor.dtype(),
                op,
            },
            tensor.numel(),
            vec![tensor.clone()],
            &[tensor],
        )
    }

    /// Copies `tensor` of rank `root` into `tensor` of every rank, in place.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Work> {
        const OP: &str = "broadcast";
        self.check_tensor(OP, tensor, true)?;
        if root >= self.world {
            return Err(TensorError::value(
                OP,
                format!("root {root} is not a rank of a world of {}", self.world),
            ));
        }
        let p = dev_ptr(tensor);
        self.issue(
            CollectiveCall::Broadcast {
                send: p,
                recv: p,
                count: tensor.numel(),
                dtype: tensor.dtype(),
                root,
            },
            tensor.numel(),
            vec![tensor.clone()],
            &[tensor],
        )
    }

    /// Checks that `whole` has world-size times the elements of `part`
    /// (all_gather's output, reduce_scatter's input). The product is checked:
    /// a wrapped one could match a small tensor.
    fn check_world_multiple(
        &self,
        op: &'static str,
        whole: &Tensor,
        whole_name: &str,
        part: &Tensor,
        part_name: &str,
    ) -> Result<()> {
        let need = part.numel().checked_mul(self.world);
        if need == Some(whole.numel()) {
            return Ok(());
        }
        Err(TensorError::shape(
            op,
            format!(
                "the {whole_name} has {} elements; {} ranks of {} {part_name} need {}",
                whole.numel(),
                self.world,
                part.numel(),
                need.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string())
            ),
        ))
    }

    /// Gathers every rank's `input` into `output`, rank `r`'s elements at
    /// `r * input.numel()` (row-major order); `output` is contiguous, of the
    /// input's dtype, with `world_size * input.numel()` elements. A
    /// non-contiguous input is copied first.
    pub fn all_gather(&self, input: &Tensor, output: &Tensor) -> Result<Work> {
        const OP: &str = "all_gather";
        self.check_tensor(OP, input, false)?;
        self.check_tensor(OP, output, true)?;
        check_same_dtype(OP, input, output)?;
        self.check_world_multiple(OP, output, "output", input, "elements")?;
        let input = input.contiguous()?;
        self.issue(
            CollectiveCall::AllGather {
                send: dev_ptr(&input),
                recv: dev_ptr(output),
                send_count: input.numel(),
                dtype: input.dtype(),
            },
            output.numel(),
            vec![input.clone(), output.clone()],
            &[output],
        )
    }

    /// Reduces every rank's `input` and leaves block `rank` of the result in
    /// `output`: `input` has `world_size * output.numel()` elements (a
    /// non-contiguous input is copied first), `output` is contiguous, of the
    /// input's dtype.
    pub fn reduce_scatter(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "reduce_scatter";
        self.check_tensor(OP, input, false)?;
        self.check_tensor(OP, output, true)?;
        check_same_dtype(OP, input, output)?;
        check_reduce(OP, input.dtype(), op)?;
        self.check_world_multiple(OP, input, "input", output, "output elements")?;
        let input = input.contiguous()?;
        self.issue(
            CollectiveCall::ReduceScatter {
                send: dev_ptr(&input),
                recv: dev_ptr(output),
                recv_count: output.numel(),
                dtype: input.dtype(),
                op,
            },
            input.numel(),
            vec![input.clone(), output.clone()],
            &[output],
        )
    }

    /// The tensor is on this rank's device (and contiguous where written in place).
    fn check_tensor(&self, op: &'static str, t: &Tensor, written: bool) -> Result<()> {
        if t.device() != self.device {
            return Err(TensorError::DeviceMismatch {
                op,
                lhs: t.device(),
                rhs: self.device,
            });
        }
        if written && !t.is_contiguous() {
            return Err(TensorError::value(
                op,
                format!(
                    "the tensor written (shape {:?}, strides {:?}) must be contiguous; call .contiguous() first",
                    t.shape(),
                    t.strides()
                ),
            ));
        }
        Ok(())
    }

    /// Orders, issues and records one collective; see the module docs.
    fn issue(
        &self,
        call: CollectiveCall,
        elements: usize,
        keep: Vec<Tensor>,
        written: &[&Tensor],
    ) -> Result<Work> {
        let compute = cuda::current_stream(self.device)?;
        if elements > 0 {
            let ready = Event::new(self.device, false)?;
            ready.record(&compute)?;
            self.stream.wait_event(&ready)?;
            let raw = self.raw.lock();
            gpu::nccl_collective(self.device, &raw, &call, self.stream.id())?;
        }
        for t in written {
            t.bump_version();
        }
        for t in &keep {
            t.record_stream(&self.stream)?;
        }
        let done = Arc::new(Event::new(self.device, false)?);
        let in_group = GROUP.with(|g| {
            if let Some(p) = g.borrow_mut().as_mut() {
                p.push((self.stream, Arc::clone(&done), keep.clone()));
                true
            } else {
                false
            }
        });
        if !in_group {
            done.record(&self.stream)?;
        }
        Ok(Work {
            device: self.device,
            done: Some(done),
            _keep: keep,
        })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // Whatever is queued with this communicator runs first.
        let _ = self.stream.synchronize();
        gpu::nccl_destroy(self.device, &self.raw.lock());
    }
}

/// The device address of a contiguous tensor's first element.
fn dev_ptr(t: &Tensor) -> u64 {
    t.storage().mem().ptr + (t.offset() * t.dtype().size()) as u64
}

fn check_same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(TensorError::dtype(
            op,
            format!("the input is {} but the output is {}", a.dtype(), b.dtype()),
        ));
    }
    Ok(())
}

/// Which dtypes a reduction accepts: no bool; `Avg` on floats only.
fn check_reduce(op: &'static str, dtype: DType, r: ReduceOp) -> Result<()> {
    if dtype == DType::Bool {
        return Err(TensorError::dtype(
            op,
            "bool tensors cannot be reduced; convert to u8 or use broadcast/all_gather",
        ));
    }
    if r == ReduceOp::Avg && !dtype.is_float() {
        return Err(TensorError::dtype(
            op,
            format!("Avg needs a float dtype, not {dtype}; use Sum"),
        ));
    }
    Ok(())
}
