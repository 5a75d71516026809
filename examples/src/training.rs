//! Shared pieces of the training benchmarks (`gpt`, `memory_hungry`): a
//! small `--flag value` parser, the allocator figures of a run in PyTorch's
//! key names, and the median of step times.

use std::collections::HashMap;
use strata::Device;

/// `--name value` pairs from the command line, checked against the known names.
pub struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    /// Parses `args` (without the program name); every flag must be in
    /// `known` and have a value.
    pub fn parse(args: impl Iterator<Item = String>, known: &[&str]) -> Result<Flags, String> {
        let mut values = HashMap::new();
        let mut args = args.peekable();
        while let Some(a) = args.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}; flags are --name value"));
            };
            if !known.contains(&name) {
                return Err(format!(
                    "unknown flag --{name}; known: --{}",
                    known.join(" --")
                ));
            }
            let Some(v) = args.next() else {
                return Err(format!("--{name} needs a value"));
            };
            values.insert(name.to_string(), v);
        }
        Ok(Flags { values })
    }

    /// The value of `--name`, or `default`.
    pub fn str(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// The value of `--name` as a number, or `default`.
    pub fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?} is not a valid number")),
        }
    }

    /// The device of `--device` (`cuda`, `cuda:N` or `cpu`), or `default`.
    pub fn device(&self, default: &str) -> Result<Device, String> {
        let s = self.str("device", default);
        Device::parse(&s).map_err(|e| format!("--device {s:?}: {e}"))
    }
}

/// How often blocks are checkpointed: `none` (0), `every` (1) or `every:K`.
pub fn parse_checkpoint(s: &str) -> Result<usize, String> {
    match s {
        "none" => Ok(0),
        "every" => Ok(1),
        _ => match s.strip_prefix("every:").map(str::parse::<usize>) {
            Some(Ok(k)) if k > 0 => Ok(k),
            _ => Err(format!(
                "--checkpoint {s:?}: expected none, every or every:K with K > 0"
            )),
        },
    }
}

/// The median of `v` (the upper one of an even count, as `statistics.median` averages;
/// here the mean of the two middle values, as Python does).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Peak allocated, peak reserved and the number of device allocations of
/// `device`'s allocator (PyTorch's `allocated_bytes.all.peak`,
/// `reserved_bytes.all.peak`, `num_device_alloc`).
pub fn peaks(device: Device) -> Result<(i64, i64, i64), strata::AllocError> {
    let st = strata::memory_stats(device)?;
    Ok((
        st.allocated_bytes.all().peak,
        st.reserved_bytes.all().peak,
        st.num_device_alloc,
    ))
}

/// Rounds to `digits` decimals (as Python's `round`, for the JSON line).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// Where a training step's time goes, phase by phase: the host time from
/// one mark to the next, and on a GPU the device time between CUDA events
/// recorded on the current stream at the same marks (the device time of a
/// phase is the span between its queued work's end and the previous
/// phase's, so a phase the host queues faster than the GPU runs shows its
/// real length there, not in the host column).
///
/// ```
/// use strata::Device;
/// use strata_examples::training::Phases;
/// let mut p = Phases::new(Device::Cpu, &["forward", "backward"]).unwrap();
/// p.start().unwrap();
/// p.mark().unwrap(); // after the forward pass
/// p.mark().unwrap(); // after backward
/// p.end(true).unwrap(); // after the step's synchronisation
/// let j = p.json();
/// assert!(j["host_ms"]["backward"].is_number());
/// assert!(j["device_ms"].is_null()); // no events on the CPU
/// ```
pub struct Phases {
    names: Vec<&'static str>,
    events: Vec<strata_tensor::cuda::Event>,
    stream: Option<strata_tensor::cuda::Stream>,
    host_marks: Vec<std::time::Instant>,
    device_ms: Vec<Vec<f64>>,
    host_ms: Vec<Vec<f64>>,
}

impl Phases {
    /// Timing for the phases `names` of every step on `device`.
    pub fn new(
        device: Device,
        names: &[&'static str],
    ) -> Result<Phases, strata_tensor::TensorError> {
        let (events, stream) = match device {
            Device::Cuda(_) => (
                (0..=names.len())
                    .map(|_| strata_tensor::cuda::Event::new(device, true))
                    .collect::<Result<Vec<_>, _>>()?,
                Some(strata_tensor::cuda::current_stream(device)?),
            ),
            Device::Cpu => (Vec::new(), None),
        };
        Ok(Phases {
            names: names.to_vec(),
            events,
            stream,
            host_marks: Vec::new(),
            device_ms: vec![Vec::new(); names.len()],
            host_ms: vec![Vec::new(); names.len()],
        })
    }

    /// Starts a step (the first mark).
    pub fn start(&mut self) -> Result<(), strata_tensor::TensorError> {
        self.host_marks.clear();
        self.mark()
    }

    /// Ends the phase in progress (one mark per phase after `start`).
    pub fn mark(&mut self) -> Result<(), strata_tensor::TensorError> {
        let i = self.host_marks.len();
        if let (Some(s), Some(e)) = (&self.stream, self.events.get(i)) {
            e.record(s)?;
        }
        self.host_marks.push(std::time::Instant::now());
        Ok(())
    }

    /// Closes a step once the device has finished it; `keep` counts it
    /// (false for warm-up steps). A step with a missing mark is not counted.
    pub fn end(&mut self, keep: bool) -> Result<(), strata_tensor::TensorError> {
        if !keep || self.host_marks.len() != self.names.len() + 1 {
            return Ok(());
        }
        for k in 0..self.names.len() {
            let h = self.host_marks[k + 1] - self.host_marks[k];
            self.host_ms[k].push(h.as_secs_f64() * 1e3);
            if self.stream.is_some() {
                let d = self.events[k].elapsed_ms(&self.events[k + 1])?;
                self.device_ms[k].push(d as f64);
            }
        }
        Ok(())
    }

    /// `{"host_ms": {phase: median}, "device_ms": {phase: median} or null}`.
    pub fn json(&self) -> serde_json::Value {
        let table = |v: &[Vec<f64>]| {
            let m: serde_json::Map<String, serde_json::Value> = self
                .names
                .iter()
                .zip(v)
                .map(|(n, x)| (n.to_string(), round(median(x.clone()), 3).into()))
                .collect();
            serde_json::Value::Object(m)
        };
        serde_json::json!({
            "host_ms": table(&self.host_ms),
            "device_ms": if self.stream.is_some() { table(&self.device_ms) } else { serde_json::Value::Null },
        })
    }
}
