//! Allocator configuration in PyTorch's `key:value,key:value` syntax.
//!
//! The string comes from the `STRATA_ALLOC_CONF` environment variable (read when a
//! device's allocator is first created) or from code through
//! [`AllocatorConfig::parse`]. Keys, with PyTorch's meanings:
//!
//! | key | accepted | default |
//! |---|---|---|
//! | `expandable_segments` | `True`/`False` | on where the driver supports virtual memory |
//! | `max_split_size_mb` | integer MiB >= 20 | unlimited |
//! | `roundup_power2_divisions` | a power of two, or `[K:v,...,>:v]` (K MiB a power of two, v a power of two or 0) | off |
//! | `garbage_collection_threshold` | number strictly between 0 and 1 (needs a memory fraction) | off |
//! | `per_process_memory_fraction` | number in [0, 1] | 1 (no limit) |
//! | `max_non_split_rounding_mb` | integer MiB >= 20 | 20 |
//! | `release_lock_on_cudamalloc` (alias `release_lock_on_hipmalloc`) | `True`/`False` | `False` |
//! | `graph_capture_record_stream_reuse` | `True`/`False` | `False` |
//! | `backend` | `native` | `native` |
//! | `pinned_use_cuda_host_register` (alias `pinned_use_hip_host_register`) | `True`/`False` | `False` |
//! | `pinned_num_register_threads` | a power of two, at most 128 | 1 |
//! | `pinned_use_background_threads` | `True`/`False` | `False` |
//! | `pinned_reserve_segment_size_mb` | integer MiB > 0 | 0 (off) |
//! | `throw_on_cudamalloc_oom` | `True`/`False` | `False` |
//! | `large_segment_size_mb` | integer MiB > 10 | 20 |
//! | `pinned_max_round_threshold_mb`, `pinned_max_cached_size_mb` | integer MiB | unlimited |
//! | `pinned_free_catch_all` | `True`/`False` | `False` |
//! | `expandable_segments_reserve` | a positive fraction of the device (`0.5`), or GiB (`40G`) | capacity + 1/8 |
//! | `expandable_segments_reserve_by_class` | `[class:reserve,...]` | none |
//!
//! `max_non_split_rounding_mb` has PyTorch's meaning: an oversize request (at
//! least `max_split_size`) may reuse a cached block at most this much larger.
//! So has `throw_on_cudamalloc_oom` (a key of PyTorch 2.12 and later): a
//! request within the memory fraction in force whose device allocation
//! would take reserved memory past this configuration's
//! `per_process_memory_fraction` of the device (the whole device when
//! unset) fails at once, releasing no cached block
//! ([`AllocError::OomRejected`](crate::AllocError::OomRejected)); a request
//! past the fraction in force goes the ordinary way first, as in PyTorch
//! 2.15, so with the fraction given only at start-up the key rejects only
//! what the device itself could not hold. And
//! `large_segment_size_mb` (also 2.12 on): the ordinary segment of a request
//! between 1 and 10 MiB, the least `max_split_size_mb` and
//! `max_non_split_rounding_mb` (which follows it unless named); expandable
//! segments map the driver's pages whatever it says. So have
//! `pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb` (2.12 on),
//! for the pinned host allocator ([`crate::pinned::PinnedLimits`]), and
//! `expandable_segments_reserve(_by_class)` (2.12 on): the address range a
//! new expandable segment reserves ([`Reserve`]; bad values are errors, where
//! PyTorch warns and keeps the old value).
//! The other keys are accepted and kept (so a configuration written for
//! PyTorch 2.11 works unchanged) but change nothing in strata:
//! `release_lock_on_cudamalloc` because strata's driver calls under the lock are
//! the ones the allocator needs anyway (there is no second device lock to
//! release), the CUDA-graph key because strata has no graph pools, and the
//! other `pinned_*` keys because the pinned host allocator ([`crate::pinned`]) has its
//! own size classes and pins with `cuMemHostAlloc`. `backend:cudaMallocAsync` is
//! rejected: strata has only its native allocator.
//!
//! ```
//! use strata_alloc::AllocatorConfig;
//! let c = AllocatorConfig::parse("expandable_segments:False,max_split_size_mb:128").unwrap();
//! assert_eq!(c.expandable_segments, Some(false));
//! assert_eq!(c.max_split_size, Some(128 << 20));
//! let e = AllocatorConfig::parse("max_split_size_mb:4").unwrap_err();
//! assert!(e.to_string().contains("max_split_size_mb"));
//! ```

use std::fmt;

/// The environment variable holding the configuration string.
pub const ENV_VAR: &str = "STRATA_ALLOC_CONF";

/// Number of power-of-two intervals that `roundup_power2_divisions` covers
/// (1 MiB … 64 GiB and above).
pub const ROUNDUP_INTERVALS: usize = 16;

/// A configuration string that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A key strata does not know.
    #[error("unknown key '{key}' in allocator configuration; accepted keys: expandable_segments, max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, per_process_memory_fraction, release_lock_on_cudamalloc, graph_capture_record_stream_reuse, backend, pinned_use_cuda_host_register, pinned_num_register_threads, pinned_use_background_threads, pinned_reserve_segment_size_mb, throw_on_cudamalloc_oom, large_segment_size_mb, pinned_max_round_threshold_mb, pinned_max_cached_size_mb, pinned_free_catch_all, expandable_segments_reserve, expandable_segments_reserve_by_class")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A known key with a value out of range or of the wrong form. The text
    /// begins "`<key>` is invalid", as PyTorch's does for
    /// `per_process_memory_fraction` (which its
    /// `test_allocator_memory_fraction_setting` looks for).
    #[error(
        "{key} is invalid: bad value '{value}' in the allocator configuration; it takes {accepted}"
    )]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What the key accepts.
        accepted: &'static str,
    },
    /// A piece of the string that is not `key:value`.
    #[error("malformed allocator configuration near '{near}': expected comma-separated key:value pairs, e.g. expandable_segments:True,max_split_size_mb:128")]
    Malformed {
        /// The text that could not be split.
        near: String,
    },
}

/// Allocator settings. `Default` gives strata's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocatorConfig {
    /// `Some(true)`/`Some(false)` force expandable segments on or off; `None`
    /// (the default) turns them on wherever the driver supports virtual memory.
    pub expandable_segments: Option<bool>,
    /// Blocks of at least this many bytes are never split; `None` is unlimited.
    pub max_split_size: Option<u64>,
    /// Divisions per power-of-two interval, index 0 for sizes below 2 MiB, index
    /// i for `[2^(20+i), 2^(21+i))`; 0 or 1 means plain 512-byte rounding.
    pub roundup_power2_divisions: [u64; ROUNDUP_INTERVALS],
    /// Reclaim cached blocks once usage passes this fraction of the allowed
    /// memory (needs `per_process_memory_fraction`).
    pub garbage_collection_threshold: Option<f64>,
    /// The fraction of the device's memory this process may reserve.
    pub per_process_memory_fraction: Option<f64>,
    /// Slack in bytes allowed when an oversize request reuses a larger cached
    /// block (PyTorch's `max_non_split_rounding_mb`; default 20 MiB).
    pub max_non_split_rounding: u64,
    /// `release_lock_on_cudamalloc` (accepted, no effect in strata).
    pub release_lock_on_cudamalloc: bool,
    /// `graph_capture_record_stream_reuse` (accepted, no effect in strata).
    pub graph_capture_record_stream_reuse: bool,
    /// `pinned_use_cuda_host_register` (accepted, no effect in strata).
    pub pinned_use_cuda_host_register: bool,
    /// `pinned_num_register_threads` (accepted, no effect in strata).
    pub pinned_num_register_threads: u64,
    /// `pinned_use_background_threads` (accepted, no effect in strata).
    pub pinned_use_background_threads: bool,
    /// `pinned_reserve_segment_size_mb` in bytes, 0 when off (accepted, no
    /// effect in strata).
    pub pinned_reserve_segment_size: u64,
    /// `throw_on_cudamalloc_oom` (PyTorch 2.12 on): a request whose device
    /// allocation would take reserved memory past this configuration's
    /// `per_process_memory_fraction` of the device (the whole device when
    /// unset) fails at once, with no cached block released and no retry;
    /// counted in `num_oom_rejections`, not in `num_ooms`. PyTorch 2.15
    /// checks the memory fraction in force first: a request past that one
    /// takes the ordinary out-of-memory path instead.
    pub throw_on_cudamalloc_oom: bool,
    /// `large_segment_size_mb` (PyTorch 2.12 on), in bytes: the segment a
    /// request of more than 1 MiB and less than 10 MiB gets with ordinary
    /// segments (20 MiB by default), and the least `max_split_size` and
    /// `max_non_split_rounding` may be.
    pub large_segment_size: u64,
    /// `pinned_max_round_threshold_mb` (PyTorch 2.12 on), in bytes: pinned
    /// requests above it get blocks of their own size (see
    /// [`PinnedLimits`](crate::pinned::PinnedLimits)). Unlimited by default.
    pub pinned_max_round_threshold: u64,
    /// `pinned_max_cached_size_mb` (PyTorch 2.12 on), in bytes: pinned blocks
    /// above it are given back when freed instead of cached. Unlimited by
    /// default.
    pub pinned_max_cached_size: u64,
    /// `pinned_free_catch_all` (PyTorch 2.12 on): accepted and kept, no
    /// effect. PyTorch uses it to swallow an exception thrown while a pinned
    /// block is freed; strata's pinned free never unwinds (a failure to give a
    /// block back keeps it cached, and `PinnedBuffer`'s drop returns no error).
    pub pinned_free_catch_all: bool,
    /// `expandable_segments_reserve` (PyTorch 2.12 on): the address range
    /// each new expandable segment reserves, at most the default (the
    /// device's capacity and an eighth). `None`: the default.
    pub expandable_segments_reserve: Option<Reserve>,
    /// `expandable_segments_reserve_by_class`: the reserve of the segments of
    /// streams tagged with each class
    /// ([`CachingAllocator::set_stream_reserve_class`](crate::CachingAllocator::set_stream_reserve_class)),
    /// before `expandable_segments_reserve`.
    pub expandable_segments_reserve_by_class: Vec<(String, Reserve)>,
}

/// An expandable segment's address reservation (`expandable_segments_reserve`):
/// a fraction of the device's capacity (`0.5`; above 1 allowed) or a size in
/// GiB (`40G`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reserve {
    /// This fraction of the device's capacity.
    Fraction(f64),
    /// This many GiB.
    Gib(f64),
}

impl Reserve {
    /// Bytes on a device of `capacity` bytes (saturating: a float-to-integer
    /// `as` cast clamps).
    pub fn bytes(self, capacity: u64) -> u64 {
        match self {
            Reserve::Fraction(f) => (f * capacity as f64) as u64,
            Reserve::Gib(g) => (g * (1u64 << 30) as f64) as u64,
        }
    }

    /// PyTorch's syntax: a positive finite number, or one followed by `G`
    /// (or `g`) for GiB.
    fn parse(v: &str) -> Option<Reserve> {
        let (num, gib) = match v.strip_suffix(['G', 'g']) {
            Some(n) => (n, true),
            None => (v, false),
        };
        let x: f64 = num.parse().ok().filter(|&x| reserve_ok(x))?;
        Some(if gib {
            Reserve::Gib(x)
        } else {
            Reserve::Fraction(x)
        })
    }
}

/// A reserve's number (a fraction or GiB): positive and finite.
pub(crate) fn reserve_ok(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// A class name of `expandable_segments_reserve_by_class`: what PyTorch
/// 2.15's tokenizer reads as one token, any non-empty text without the
/// list's separators (`,`, `:`, `[`, `]`) and without the whitespace it
/// skips (C's `isspace`): `serving`, `a.b`, `>`, `é` are names
/// (`torch._C._accelerator_setAllocatorSettings` takes
/// `[a.b:0.5]` silently), and each prints back into a string that parses
/// to the same class.
pub(crate) fn reserve_class_ok(class: &str) -> bool {
    !class.is_empty()
        && !class.contains([',', ':', '[', ']', ' ', '\t', '\n', '\x0b', '\x0c', '\r'])
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reserve::Fraction(x) => write!(f, "{x}"),
            Reserve::Gib(x) => write!(f, "{x}G"),
        }
    }
}

/// PyTorch's default `large_segment_size_mb` (`kLargeBuffer`), in bytes.
pub const DEFAULT_LARGE_SEGMENT_SIZE: u64 = 20 << 20;

/// PyTorch's default `max_non_split_rounding_mb`, in bytes.
pub const DEFAULT_MAX_NON_SPLIT_ROUNDING: u64 = 20 << 20;

impl Default for AllocatorConfig {
    fn default() -> Self {
        AllocatorConfig {
            expandable_segments: None,
            max_split_size: None,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            garbage_collection_threshold: None,
            per_process_memory_fraction: None,
            max_non_split_rounding: DEFAULT_MAX_NON_SPLIT_ROUNDING,
            release_lock_on_cudamalloc: false,
            graph_capture_record_stream_reuse: false,
            pinned_use_cuda_host_register: false,
            pinned_num_register_threads: 1,
            pinned_use_background_threads: false,
            pinned_reserve_segment_size: 0,
            throw_on_cudamalloc_oom: false,
            large_segment_size: DEFAULT_LARGE_SEGMENT_SIZE,
            pinned_max_round_threshold: u64::MAX,
            pinned_max_cached_size: u64::MAX,
            pinned_free_catch_all: false,
            expandable_segments_reserve: None,
            expandable_segments_reserve_by_class: Vec::new(),
        }
    }
}

/// The value of the environment variable `name`: `None` when it is unset,
/// a [`ConfigError::BadValue`] naming it when it is not UTF-8 (the
/// settings strata reads are ASCII; `std::env::var` would report such a
/// value as an error that is easily taken for "unset").
pub(crate) fn env_value(name: &'static str) -> Result<Option<String>, ConfigError> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(v) => v
            .into_string()
            .map(Some)
            .map_err(|v| ConfigError::BadValue {
                key: name,
                value: v.to_string_lossy().into_owned(),
                accepted:
                    "UTF-8 text (the value holds bytes that are not): unset it or write it again",
            }),
    }
}

impl AllocatorConfig {
    /// Reads `STRATA_ALLOC_CONF`; defaults when it is unset or empty. A
    /// value that is not UTF-8 is [`ConfigError::BadValue`] (it used to be
    /// taken for an unset variable, and the setting silently dropped).
    pub fn from_env() -> Result<AllocatorConfig, ConfigError> {
        match env_value(ENV_VAR)? {
            Some(s) => AllocatorConfig::parse(&s),
            None => Ok(AllocatorConfig::default()),
        }
    }

    /// Parses a configuration string; keys not given keep their defaults. A live
    /// allocator takes a new string with
    /// [`CachingAllocator::set_allocator_settings`](crate::CachingAllocator::set_allocator_settings),
    /// by PyTorch's rule for a re-parse ([`reparse`](Self::reparse)).
    pub fn parse(s: &str) -> Result<AllocatorConfig, ConfigError> {
        let mut c = AllocatorConfig::default();
        c.apply(s)?;
        Ok(c)
    }

    /// The configuration that `s` makes of this one at run time, with the rule
    /// of PyTorch's `torch.cuda.memory._set_allocator_settings` (which
    /// re-parses the process-wide configuration in place): `max_split_size`,
    /// `roundup_power2_divisions` and `garbage_collection_threshold` go back to
    /// their defaults unless `s` names them, `max_non_split_rounding` goes
    /// back to the large segment size (as in PyTorch's newest `parseArgs`),
    /// and every other key keeps its value unless `s` names it, the large
    /// segment size included. So expandable segments stay as they were,
    /// and so does `per_process_memory_fraction`. (A live allocator's memory
    /// fraction in force is not this field but
    /// `CachingAllocator::set_memory_fraction`'s, as in PyTorch, where the
    /// configuration's fraction is applied when a device's allocator is
    /// created and read by `throw_on_cudamalloc_oom`.)
    ///
    /// ```
    /// use strata_alloc::AllocatorConfig;
    /// let c = AllocatorConfig::parse("expandable_segments:False,max_split_size_mb:64").unwrap();
    /// let d = c.reparse("roundup_power2_divisions:4").unwrap();
    /// assert_eq!(d.max_split_size, None); // reset
    /// assert_eq!(d.expandable_segments, Some(false)); // kept
    /// assert!(c.reparse("max_split_size_mb:1").is_err());
    /// ```
    pub fn reparse(&self, s: &str) -> Result<AllocatorConfig, ConfigError> {
        let defaults = AllocatorConfig::default();
        // PyTorch's newest `parseArgs` also sets `max_non_split_rounding`
        // back to the large segment size in force (then to the one this
        // string names, if any: `apply_pairs`) unless the string names it.
        let mut next = AllocatorConfig {
            max_split_size: defaults.max_split_size,
            roundup_power2_divisions: defaults.roundup_power2_divisions,
            garbage_collection_threshold: defaults.garbage_collection_threshold,
            max_non_split_rounding: self.large_segment_size,
            ..self.clone()
        };
        next.apply_pairs(s)?;
        Ok(next)
    }

    /// Applies the keys of `s` on top of this configuration. On an error the
    /// configuration is left as it was. Applied to a configuration that
    /// [`validate`](Self::validate) accepts, the result is one it accepts
    /// too: a `large_segment_size_mb` above
    /// the `max_split_size_mb` kept from before is an error unless `s` names
    /// `max_split_size_mb` too (no settings string can put the split limit
    /// below the segment size; `parse` and `reparse` start with no limit).
    pub fn apply(&mut self, s: &str) -> Result<(), ConfigError> {
        let mut next = self.clone();
        next.apply_pairs(s)?;
        *self = next;
        Ok(())
    }

    fn apply_pairs(&mut self, s: &str) -> Result<(), ConfigError> {
        let pairs = split_pairs(s)?;
        // `large_segment_size_mb` first, wherever it stands (PyTorch parses it
        // in a pass of its own): the least values of the split keys follow it,
        // and so does `max_non_split_rounding` unless the string names it.
        for (key, value) in &pairs {
            if key == "large_segment_size_mb" {
                self.large_segment_size = parse_mib(
                    "large_segment_size_mb",
                    value,
                    MIN_LARGE_ALLOC_MIB + 1,
                    "an integer number of MiB, more than 10 (PyTorch's large-allocation threshold)",
                )?;
                // A split limit kept from before (`apply`; `parse` and
                // `reparse` start without one) may not fall below the new
                // segment size, as no string can set it there.
                let names_split = pairs.iter().any(|(k, _)| k == "max_split_size_mb");
                if !names_split
                    && self
                        .max_split_size
                        .is_some_and(|m| m < self.large_segment_size)
                {
                    return Err(ConfigError::BadValue {
                        key: "large_segment_size_mb",
                        value: value.clone(),
                        accepted: "an integer number of MiB, more than 10 and at most the max_split_size_mb in force (name max_split_size_mb in the same string to raise both)",
                    });
                }
                if !pairs.iter().any(|(k, _)| k == "max_non_split_rounding_mb") {
                    self.max_non_split_rounding = self.large_segment_size;
                }
            }
        }
        let min_split_mib = self.large_segment_size >> 20;
        let mut divisions_named = false;
        for (key, value) in pairs {
            match key.as_str() {
                "large_segment_size_mb" => {}
                "expandable_segments" => {
                    self.expandable_segments = Some(parse_bool("expandable_segments", &value)?)
                }
                "max_split_size_mb" => {
                    self.max_split_size = Some(parse_mib(
                        "max_split_size_mb",
                        &value,
                        min_split_mib,
                        "an integer number of MiB, at least large_segment_size_mb (20 unless set)",
                    )?);
                }
                "roundup_power2_divisions" => {
                    // Named again in the same string, a list starts from what
                    // the earlier entry set: PyTorch's
                    // `parseRoundUpPower2Divisions` fills the one array that
                    // `parseArgs` cleared once, so `roundup_power2_divisions:8,
                    // roundup_power2_divisions:[2:4]` keeps the 8 of the
                    // intervals from 4 MiB up.
                    let base = if divisions_named {
                        self.roundup_power2_divisions
                    } else {
                        [0; ROUNDUP_INTERVALS]
                    };
                    self.roundup_power2_divisions = parse_divisions(&value, base)?;
                    divisions_named = true;
                }
                "garbage_collection_threshold" => {
                    let v = parse_stod(&value)
                        .filter(|&v| gc_threshold_ok(v))
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "garbage_collection_threshold",
                            value: value.clone(),
                            accepted: "a number strictly between 0 and 1, e.g. 0.8",
                        })?;
                    self.garbage_collection_threshold = Some(v);
                }
                "per_process_memory_fraction" => {
                    let v = parse_stod(&value)
                        .filter(|&v| fraction_ok(v))
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "per_process_memory_fraction",
                            value: value.clone(),
                            accepted: "a number between 0 and 1, e.g. 0.5",
                        })?;
                    self.per_process_memory_fraction = Some(v);
                }
                "max_non_split_rounding_mb" => {
                    self.max_non_split_rounding = parse_mib(
                        "max_non_split_rounding_mb",
                        &value,
                        min_split_mib,
                        "an integer number of MiB, at least large_segment_size_mb (20 unless set)",
                    )?
                }
                // The device-generic spelling of c10's AllocatorConfig too.
                "release_lock_on_cudamalloc"
                | "release_lock_on_hipmalloc"
                | "release_lock_on_device_malloc" => {
                    self.release_lock_on_cudamalloc =
                        parse_bool("release_lock_on_cudamalloc", &value)?
                }
                "graph_capture_record_stream_reuse" => {
                    self.graph_capture_record_stream_reuse =
                        parse_bool("graph_capture_record_stream_reuse", &value)?
                }
                "backend" => {
                    if value != "native" {
                        return Err(ConfigError::BadValue {
                            key: "backend",
                            value,
                            accepted: "native (strata has only its native caching allocator; cudaMallocAsync is not available)",
                        });
                    }
                }
                "pinned_use_cuda_host_register"
                | "pinned_use_hip_host_register"
                | "pinned_use_host_register"
                | "pinned_use_device_host_register" => {
                    self.pinned_use_cuda_host_register =
                        parse_bool("pinned_use_cuda_host_register", &value)?
                }
                "pinned_num_register_threads" => {
                    self.pinned_num_register_threads = value
                        .parse::<u64>()
                        .ok()
                        .filter(|&n| register_threads_ok(n))
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "pinned_num_register_threads",
                            value: value.clone(),
                            accepted: "a power of two, at most 128 (e.g. 8)",
                        })?
                }
                "pinned_use_background_threads" => {
                    self.pinned_use_background_threads =
                        parse_bool("pinned_use_background_threads", &value)?
                }
                // PyTorch 2.15's `parsePinnedMaxRoundThreshold` and
                // `parsePinnedMaxCachedSize` clamp a number of MiB whose bytes
                // overflow (`17592186044416` gives 2^64 - 2^20 bytes), as for
                // the split keys.
                "pinned_max_round_threshold_mb" => {
                    self.pinned_max_round_threshold = parse_mib(
                        "pinned_max_round_threshold_mb",
                        &value,
                        0,
                        "an integer number of MiB",
                    )?
                }
                "pinned_max_cached_size_mb" => {
                    self.pinned_max_cached_size = parse_mib(
                        "pinned_max_cached_size_mb",
                        &value,
                        0,
                        "an integer number of MiB",
                    )?
                }
                "expandable_segments_reserve" => {
                    self.expandable_segments_reserve =
                        Some(Reserve::parse(&value).ok_or_else(|| ConfigError::BadValue {
                            key: "expandable_segments_reserve",
                            value: value.clone(),
                            accepted: RESERVE_ACCEPTED,
                        })?)
                }
                "expandable_segments_reserve_by_class" => {
                    self.expandable_segments_reserve_by_class = parse_reserve_classes(&value)?
                }
                "pinned_free_catch_all" => {
                    self.pinned_free_catch_all = parse_bool("pinned_free_catch_all", &value)?
                }
                "throw_on_cudamalloc_oom" => {
                    self.throw_on_cudamalloc_oom = parse_bool("throw_on_cudamalloc_oom", &value)?
                }
                // PyTorch keeps the number of MiB as written (any `u64` from
                // 1: `parsePinnedReserveSegmentSize`); strata keeps bytes, so
                // a number whose bytes overflow is clamped, not refused.
                "pinned_reserve_segment_size_mb" => {
                    self.pinned_reserve_segment_size = parse_mib(
                        "pinned_reserve_segment_size_mb",
                        &value,
                        1,
                        "an integer number of MiB, at least 1",
                    )?
                }
                _ => return Err(ConfigError::UnknownKey { key }),
            }
        }
        Ok(())
    }

    /// Checks that every field is in the range its key accepts in a
    /// configuration string (what [`parse`](Self::parse) guarantees): for
    /// configurations built field by field. The error names the key, the
    /// value and what the key accepts.
    ///
    /// ```
    /// use strata_alloc::{AllocatorConfig, ConfigError};
    /// let mut c = AllocatorConfig::default();
    /// assert!(c.validate().is_ok());
    /// c.per_process_memory_fraction = Some(f64::NAN);
    /// assert!(matches!(
    ///     c.validate(),
    ///     Err(ConfigError::BadValue { key: "per_process_memory_fraction", .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &'static str, value: String, accepted: &'static str| {
            Err(ConfigError::BadValue {
                key,
                value,
                accepted,
            })
        };
        if self.large_segment_size <= MIN_LARGE_ALLOC_MIB << 20 {
            return bad(
                "large_segment_size_mb",
                format!("{} bytes", self.large_segment_size),
                "more than 10 MiB (large_segment_size is in bytes: 20 << 20 by default)",
            );
        }
        if let Some(m) = self.max_split_size {
            if m < self.large_segment_size {
                return bad(
                    "max_split_size_mb",
                    format!("{m} bytes"),
                    "at least large_segment_size (20 MiB unless set; max_split_size is in bytes: 20 << 20 or more), or None for unlimited",
                );
            }
        }
        if let Some(d) = self
            .roundup_power2_divisions
            .iter()
            .find(|&&d| !divisions_ok(d))
        {
            return bad(
                "roundup_power2_divisions",
                d.to_string(),
                "each interval's divisions a power of two, or 0 for plain 512-byte rounding",
            );
        }
        if let Some(t) = self.garbage_collection_threshold {
            if !gc_threshold_ok(t) {
                return bad(
                    "garbage_collection_threshold",
                    t.to_string(),
                    "a number strictly between 0 and 1, e.g. 0.8, or None for off",
                );
            }
        }
        if let Some(f) = self.per_process_memory_fraction {
            if !fraction_ok(f) {
                return bad(
                    "per_process_memory_fraction",
                    f.to_string(),
                    "a number between 0 and 1, e.g. 0.5, or None for no limit",
                );
            }
        }
        if self.max_non_split_rounding < self.large_segment_size {
            return bad(
                "max_non_split_rounding_mb",
                format!("{} bytes", self.max_non_split_rounding),
                "at least large_segment_size (20 MiB unless set; max_non_split_rounding is in bytes: 20 << 20 or more)",
            );
        }
        let threads = self.pinned_num_register_threads;
        if !register_threads_ok(threads) {
            return bad(
                "pinned_num_register_threads",
                threads.to_string(),
                "a power of two, at most 128 (e.g. 8)",
            );
        }
        let reserve = self.pinned_reserve_segment_size;
        if reserve != 0 && reserve < 1 << 20 {
            return bad(
                "pinned_reserve_segment_size_mb",
                format!("{reserve} bytes"),
                "0 for off, or at least 1 MiB (the field is in bytes)",
            );
        }
        let number = |r: &Reserve| match *r {
            Reserve::Fraction(x) | Reserve::Gib(x) => x,
        };
        if let Some(r) = self.expandable_segments_reserve {
            if !reserve_ok(number(&r)) {
                return bad(
                    "expandable_segments_reserve",
                    r.to_string(),
                    RESERVE_ACCEPTED,
                );
            }
        }
        if let Some((class, r)) = self
            .expandable_segments_reserve_by_class
            .iter()
            .find(|(class, r)| !reserve_class_ok(class) || !reserve_ok(number(r)))
        {
            return bad(
                "expandable_segments_reserve_by_class",
                format!("{class:?}:{r}"),
                RESERVE_CLASSES_ACCEPTED,
            );
        }
        // A class listed twice: its string form (`Display`) would parse back
        // to the last reserve (PyTorch's map), while a look-up finds the
        // first, so the two would disagree.
        let classes = &self.expandable_segments_reserve_by_class;
        let mut names: Vec<&str> = classes.iter().map(|(c, _)| c.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return bad(
                "expandable_segments_reserve_by_class",
                format!("{:?} listed twice", w[0]),
                "each class listed once (keep the entry whose reserve you want)",
            );
        }
        Ok(())
    }

    /// `max_split_size` as PyTorch's statistic (`memory_stats()["max_split_size"]`
    /// and the snapshot's `allocator_settings`): bytes, -1 when unlimited. A
    /// limit beyond `i64::MAX` bytes (`max_split_size_mb` above 8 EiB) reads
    /// `i64::MAX`, never a wrapped negative figure.
    pub fn max_split_size_stat(&self) -> i64 {
        self.max_split_size
            .map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX))
    }

    /// Divisions in force for a request of `size` bytes.
    pub fn divisions_for(&self, size: u64) -> u64 {
        let log = 63 - size.max(1).leading_zeros() as i64;
        let idx = (log - 20).clamp(0, ROUNDUP_INTERVALS as i64 - 1) as usize;
        self.roundup_power2_divisions[idx]
    }
}

impl fmt::Display for AllocatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match self.expandable_segments {
            Some(true) => parts.push("expandable_segments:True".to_string()),
            Some(false) => parts.push("expandable_segments:False".to_string()),
            None => {}
        }
        if let Some(m) = self.max_split_size {
            parts.push(format!("max_split_size_mb:{}", m >> 20));
        }
        // Any count but 0 (a count of 1 rounds as 0 does, but it is a
        // setting of its own, which the string must carry back).
        if self.roundup_power2_divisions.iter().any(|&d| d != 0) {
            let list: Vec<String> = self
                .roundup_power2_divisions
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}:{d}", 1u64 << i))
                .collect();
            parts.push(format!("roundup_power2_divisions:[{}]", list.join(",")));
        }
        if let Some(g) = self.garbage_collection_threshold {
            parts.push(format!("garbage_collection_threshold:{g}"));
        }
        if let Some(p) = self.per_process_memory_fraction {
            parts.push(format!("per_process_memory_fraction:{p}"));
        }
        let d = AllocatorConfig::default();
        if self.large_segment_size != d.large_segment_size {
            parts.push(format!(
                "large_segment_size_mb:{}",
                self.large_segment_size >> 20
            ));
        }
        if self.max_non_split_rounding != self.large_segment_size {
            parts.push(format!(
                "max_non_split_rounding_mb:{}",
                self.max_non_split_rounding >> 20
            ));
        }
        for (key, on) in [
            (
                "release_lock_on_cudamalloc",
                self.release_lock_on_cudamalloc,
            ),
            (
                "graph_capture_record_stream_reuse",
                self.graph_capture_record_stream_reuse,
            ),
            (
                "pinned_use_cuda_host_register",
                self.pinned_use_cuda_host_register,
            ),
            (
                "pinned_use_background_threads",
                self.pinned_use_background_threads,
            ),
            ("throw_on_cudamalloc_oom", self.throw_on_cudamalloc_oom),
            ("pinned_free_catch_all", self.pinned_free_catch_all),
        ] {
            if on {
                parts.push(format!("{key}:True"));
            }
        }
        for (key, v) in [
            (
                "pinned_max_round_threshold_mb",
                self.pinned_max_round_threshold,
            ),
            ("pinned_max_cached_size_mb", self.pinned_max_cached_size),
        ] {
            if v != u64::MAX {
                parts.push(format!("{key}:{}", v >> 20));
            }
        }
        if let Some(r) = self.expandable_segments_reserve {
            parts.push(format!("expandable_segments_reserve:{r}"));
        }
        if !self.expandable_segments_reserve_by_class.is_empty() {
            let list: Vec<String> = self
                .expandable_segments_reserve_by_class
                .iter()
                .map(|(c, r)| format!("{c}:{r}"))
                .collect();
            parts.push(format!(
                "expandable_segments_reserve_by_class:[{}]",
                list.join(",")
            ));
        }
        if self.pinned_num_register_threads != d.pinned_num_register_threads {
            parts.push(format!(
                "pinned_num_register_threads:{}",
                self.pinned_num_register_threads
            ));
        }
        if self.pinned_reserve_segment_size != 0 {
            parts.push(format!(
                "pinned_reserve_segment_size_mb:{}",
                self.pinned_reserve_segment_size >> 20
            ));
        }
        if parts.is_empty() {
            write!(f, "default")
        } else {
            write!(f, "{}", parts.join(","))
        }
    }
}

/// An integer number of MiB (a `u64`), at least `min`, as bytes. A number
/// whose bytes do not fit a `u64` is clamped to the largest whole number of
/// MiB that fits (`numeric_limits<size_t>::max() / kMB`), as PyTorch's
/// `parseMaxSplitSize`, `parseMaxNonSplitRoundingSize`,
/// `parseLargeSegmentSize` and (2.15) `parsePinnedMaxRoundThreshold` and
/// `parsePinnedMaxCachedSize` do; never wrapped. A number beyond a `u64` is
/// refused, as PyTorch's `stoull` throws on it.
fn parse_mib(
    key: &'static str,
    value: &str,
    min: u64,
    accepted: &'static str,
) -> Result<u64, ConfigError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|&mb| mb >= min)
        .map(|mb| mb.min(u64::MAX >> 20) << 20)
        .ok_or_else(|| ConfigError::BadValue {
            key,
            value: value.to_string(),
            accepted,
        })
}

/// A number as PyTorch's `std::stod` reads it for
/// `garbage_collection_threshold` and `per_process_memory_fraction`, in the
/// form Rust parses (strata refuses the trailing garbage and hexadecimal
/// floats `stod` lets through). `stod` throws `out_of_range` ("stod") where
/// `strtod` reports a range error: a result that underflows to a subnormal
/// or to zero (`5e-324`, `1e-400`) and one that overflows (`1e309`); PyTorch
/// 2.15 refuses `per_process_memory_fraction:1e-400`, which Rust reads as a
/// plain 0. So these are refused too. `0e-400` is an exact zero, no range
/// error, and `inf` is written out, not an overflow (the key's range then
/// decides).
fn parse_stod(value: &str) -> Option<f64> {
    let v = value.parse::<f64>().ok()?;
    let mantissa = value.split(['e', 'E']).next().unwrap_or("");
    let nonzero_digits = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    let spelled_out = value.to_ascii_lowercase().contains("inf");
    let range_error =
        v.is_subnormal() || (v == 0.0 && nonzero_digits) || (v.is_infinite() && !spelled_out);
    (!range_error).then_some(v)
}

/// A boolean value: exactly `True` or `False`, as PyTorch's parser requires
/// (it refuses `true` and `false`).
fn parse_bool(key: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "True" => Ok(true),
        "False" => Ok(false),
        _ => Err(ConfigError::BadValue {
            key,
            value: value.to_string(),
            accepted: "True or False (capitalised, as PyTorch requires)",
        }),
    }
}

/// Splits `a:1,b:[x:1,y:2]` into `(a, 1)`, `(b, [x:1,y:2])`; whitespace is ignored.
///
/// Whitespace is what PyTorch's tokenizer skips, C's `isspace` on each byte:
/// space, tab, newline, vertical tab, form feed and carriage return. Other
/// Unicode spaces (a no-break space, U+3000, …) are bytes of a key or value
/// to PyTorch, so they make the key unknown or the value invalid here too.
fn split_pairs(s: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let s: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'))
        .collect();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut pieces = Vec::new();
    for (i, ch) in s.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => {
                depth = depth.checked_sub(1).ok_or_else(|| ConfigError::Malformed {
                    near: s[start..].to_string(),
                })?
            }
            ',' if depth == 0 => {
                pieces.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(ConfigError::Malformed {
            near: s[start..].to_string(),
        });
    }
    pieces.push(&s[start..]);
    // PyTorch reads a key, its value, then exactly one `,` when more tokens
    // follow, and takes the next token as a key: one trailing comma is fine
    // (and the empty string is no entry at all), but an empty entry anywhere
    // else makes `,` a key ("Unrecognized key ','").
    if pieces.len() > 1 && pieces.last() == Some(&"") {
        pieces.pop();
    }
    if s.is_empty() {
        pieces.clear();
    }
    if pieces.iter().any(|p| p.is_empty()) {
        let shown: String = s.chars().take(64).collect();
        return Err(ConfigError::Malformed {
            near: format!("{shown} (an empty entry: only one trailing comma is allowed)"),
        });
    }
    for p in pieces {
        let (k, v) = p.split_once(':').ok_or_else(|| ConfigError::Malformed {
            near: p.to_string(),
        })?;
        if k.is_empty() || v.is_empty() {
            return Err(ConfigError::Malformed {
                near: p.to_string(),
            });
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// PyTorch's `kMinLargeAlloc` in MiB: `large_segment_size_mb` must exceed it.
const MIN_LARGE_ALLOC_MIB: u64 = 10;

// What each key accepts, for the parser and for `AllocatorConfig::validate`.

/// Divisions of one interval: a power of two, or 0 (plain rounding).
fn divisions_ok(n: u64) -> bool {
    n == 0 || n.is_power_of_two()
}

/// `garbage_collection_threshold`: strictly between 0 and 1.
fn gc_threshold_ok(t: f64) -> bool {
    t > 0.0 && t < 1.0
}

/// `expandable_segments_reserve`: what it accepts.
const RESERVE_ACCEPTED: &str = "a positive fraction of the device's memory (e.g. 0.5; above 1 allowed) or a size in GiB (e.g. 40G)";

/// `expandable_segments_reserve_by_class`: what it accepts.
const RESERVE_CLASSES_ACCEPTED: &str = "a list [class:reserve,...], each class a name without ',', ':', '[', ']' or spaces, each reserve a positive fraction of the device's memory (0.25) or GiB (8G)";

/// `[class:reserve,...]`: each class a name (see `reserve_class_ok`),
/// each reserve as `expandable_segments_reserve` takes it; a class named
/// twice takes its last reserve (PyTorch stores `parsed[name] = spec`). `[]`
/// clears the map.
fn parse_reserve_classes(value: &str) -> Result<Vec<(String, Reserve)>, ConfigError> {
    let bad = || ConfigError::BadValue {
        key: "expandable_segments_reserve_by_class",
        value: value.to_string(),
        accepted: RESERVE_CLASSES_ACCEPTED,
    };
    let inner = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .ok_or_else(bad)?;
    let mut out: Vec<(String, Reserve)> = Vec::new();
    // A class given again replaces its value where it first appeared (a
    // look-up by name, not a scan of the list: a string of many classes
    // parses in linear time).
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    // As PyTorch 2.15 reads the list (`torch._C._accelerator_setAllocatorSettings`):
    // `[]` sets no class and one trailing comma is accepted, but any other
    // empty entry (`[,]`, `[,a:0.5]`, `[a:0.5,,b:2G]`) is refused (there an
    // internal assertion, "Index out of bounds in ConfigTokenizer").
    let mut items: Vec<&str> = if inner.is_empty() {
        Vec::new()
    } else {
        inner.split(',').collect()
    };
    if items.len() > 1 && items.last() == Some(&"") {
        items.pop();
    }
    for item in items {
        let (class, r) = item.split_once(':').ok_or_else(bad)?;
        let r = Reserve::parse(r)
            .filter(|_| reserve_class_ok(class))
            .ok_or_else(bad)?;
        match at.get(class) {
            Some(&i) => out[i].1 = r,
            None => {
                at.insert(class, out.len());
                out.push((class.to_string(), r));
            }
        }
    }
    Ok(out)
}

/// `per_process_memory_fraction`: between 0 and 1.
fn fraction_ok(f: f64) -> bool {
    (0.0..=1.0).contains(&f)
}

/// `pinned_num_register_threads`: a power of two, at most 128.
fn register_threads_ok(n: u64) -> bool {
    n.is_power_of_two() && n <= 128
}

/// `value` applied to `base`: the list form changes the intervals its
/// entries name (and those the first key and `>` fill), the single value
/// sets every interval.
fn parse_divisions(
    value: &str,
    base: [u64; ROUNDUP_INTERVALS],
) -> Result<[u64; ROUNDUP_INTERVALS], ConfigError> {
    const ACCEPTED: &str = "a power of two (e.g. 4; not 0), or a list [K:v,...,>:v] where K is a size in MiB that is a power of two and v a power of two or 0";
    let bad = || ConfigError::BadValue {
        key: "roundup_power2_divisions",
        value: value.to_string(),
        accepted: ACCEPTED,
    };
    let pow2_or_zero = |v: &str| -> Result<u64, ConfigError> {
        let n = v.parse::<u64>().map_err(|_| bad())?;
        if divisions_ok(n) {
            Ok(n)
        } else {
            Err(bad())
        }
    };
    let mut out = base;
    if let Some(list) = value.strip_prefix('[') {
        // PyTorch's `parseRoundUpPower2Divisions`: entries separated by single
        // commas, one trailing comma allowed, `[]` setting nothing; `K:v` sets
        // the interval of `K` MiB, the first key also every interval below
        // it; `>:v` fills every interval after the last key's (after the first
        // interval when no key came before); keys in any order, the last
        // value of a key winning.
        let list = list.strip_suffix(']').ok_or_else(bad)?;
        let mut items: Vec<&str> = if list.is_empty() {
            Vec::new()
        } else {
            list.split(',').collect()
        };
        if items.len() > 1 && items.last() == Some(&"") {
            items.pop();
        }
        let mut last_index = 0usize;
        let mut first = true;
        for item in items {
            let (k, v) = item.split_once(':').ok_or_else(bad)?;
            let v = pow2_or_zero(v)?;
            if k == ">" {
                for slot in out.iter_mut().skip(last_index + 1) {
                    *slot = v;
                }
                continue;
            }
            let mb = k.parse::<u64>().map_err(|_| bad())?;
            if !mb.is_power_of_two() {
                return Err(bad());
            }
            let idx = (mb.trailing_zeros() as usize).min(ROUNDUP_INTERVALS - 1);
            if first {
                for slot in out.iter_mut().take(idx) {
                    *slot = v;
                }
                first = false;
            }
            out[idx] = v;
            last_index = idx;
        }
        Ok(out)
    } else {
        // The single-value form takes a power of two only: PyTorch's
        // `isPowerOf2_64` check refuses 0 here (a list entry may be 0).
        let v = value.parse::<u64>().map_err(|_| bad())?;
        if !v.is_power_of_two() {
            return Err(bad());
        }
        Ok([v; ROUNDUP_INTERVALS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let c = AllocatorConfig::parse(
            "expandable_segments:True, max_split_size_mb:64,roundup_power2_divisions:4,garbage_collection_threshold:0.6,per_process_memory_fraction:0.5",
        )
        .unwrap();
        assert_eq!(c.expandable_segments, Some(true));
        assert_eq!(c.max_split_size, Some(64 << 20));
        assert_eq!(c.roundup_power2_divisions, [4; 16]);
        assert_eq!(c.garbage_collection_threshold, Some(0.6));
        assert_eq!(c.per_process_memory_fraction, Some(0.5));
    }

    #[test]
    fn division_lists_fill_intervals() {
        let c = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,>:8]").unwrap();
        // 256 MiB is interval 8; the first key fills everything below it.
        assert_eq!(c.roundup_power2_divisions[0], 1);
        assert_eq!(c.roundup_power2_divisions[8], 1);
        assert_eq!(c.roundup_power2_divisions[9], 2);
        assert_eq!(c.roundup_power2_divisions[10], 8);
        assert_eq!(c.roundup_power2_divisions[15], 8);
        assert_eq!(c.divisions_for(600 << 20), 2);
    }

    #[test]
    fn bad_strings_name_the_key() {
        for (s, key) in [
            ("expandable_segments:yes", "expandable_segments"),
            // Booleans are exactly True or False, as PyTorch's parser wants.
            ("expandable_segments:true", "expandable_segments"),
            (
                "release_lock_on_cudamalloc:false",
                "release_lock_on_cudamalloc",
            ),
            (
                "graph_capture_record_stream_reuse:true",
                "graph_capture_record_stream_reuse",
            ),
            ("max_split_size_mb:abc", "max_split_size_mb"),
            (
                "garbage_collection_threshold:1.5",
                "garbage_collection_threshold",
            ),
            (
                "per_process_memory_fraction:-1",
                "per_process_memory_fraction",
            ),
            ("roundup_power2_divisions:3", "roundup_power2_divisions"),
            ("roundup_power2_divisions:[3:2]", "roundup_power2_divisions"),
            ("no_such_key:1", "no_such_key"),
        ] {
            let e = AllocatorConfig::parse(s).unwrap_err();
            assert!(e.to_string().contains(key), "{s}: {e}");
        }
        assert!(matches!(
            AllocatorConfig::parse("expandable_segments"),
            Err(ConfigError::Malformed { .. })
        ));
        assert!(matches!(
            AllocatorConfig::parse("roundup_power2_divisions:[1:2"),
            Err(ConfigError::Malformed { .. })
        ));
    }

    #[test]
    fn accepts_every_key_pytorch_2_11_accepts() {
        let c = AllocatorConfig::parse(
            "max_non_split_rounding_mb:64,release_lock_on_cudamalloc:True,graph_capture_record_stream_reuse:True,backend:native,pinned_use_cuda_host_register:True,pinned_num_register_threads:8,pinned_use_background_threads:True,pinned_reserve_segment_size_mb:256",
        )
        .unwrap();
        assert_eq!(c.max_non_split_rounding, 64 << 20);
        assert!(c.release_lock_on_cudamalloc);
        assert!(c.graph_capture_record_stream_reuse);
        assert!(c.pinned_use_cuda_host_register);
        assert_eq!(c.pinned_num_register_threads, 8);
        assert!(c.pinned_use_background_threads);
        assert_eq!(c.pinned_reserve_segment_size, 256 << 20);
        // The ROCm spellings are aliases.
        let h = AllocatorConfig::parse(
            "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:True",
        )
        .unwrap();
        assert!(h.release_lock_on_cudamalloc && h.pinned_use_cuda_host_register);
        // So are the device-generic ones of c10's AllocatorConfig.
        for pinned in [
            "pinned_use_host_register",
            "pinned_use_device_host_register",
        ] {
            let g = AllocatorConfig::parse(&format!(
                "release_lock_on_device_malloc:True,{pinned}:True"
            ))
            .unwrap();
            assert!(g.release_lock_on_cudamalloc && g.pinned_use_cuda_host_register);
            let off = AllocatorConfig::parse(&format!("{pinned}:False")).unwrap();
            assert!(!off.pinned_use_cuda_host_register);
        }
        assert!(AllocatorConfig::parse("release_lock_on_device_malloc:yes").is_err());
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c);
        let d = AllocatorConfig::default();
        assert_eq!(d.max_non_split_rounding, 20 << 20);
        assert_eq!(d.pinned_num_register_threads, 1);
    }

    #[test]
    fn new_keys_check_their_values() {
        for s in [
            "max_non_split_rounding_mb:19",
            "max_non_split_rounding_mb:x",
            // Beyond a `u64` (PyTorch's `stoull` throws); a `u64` whose
            // byte count overflows is clamped instead, as PyTorch clamps it.
            "max_non_split_rounding_mb:18446744073709551616",
            "max_split_size_mb:18446744073709551616",
            "release_lock_on_cudamalloc:1",
            "pinned_num_register_threads:3",
            "pinned_num_register_threads:256",
            "pinned_num_register_threads:0",
            "pinned_use_background_threads:yes",
            "pinned_reserve_segment_size_mb:0",
            "backend:cudaMallocAsync",
            "graph_capture_record_stream_reuse:maybe",
        ] {
            let key = s.split(':').next().unwrap();
            match AllocatorConfig::parse(s) {
                Err(ConfigError::BadValue { key: k, .. }) => assert_eq!(k, key, "{s}"),
                other => panic!("{s}: expected BadValue, got {other:?}"),
            }
        }
        assert!(matches!(
            AllocatorConfig::parse("pinned_no_such_thing:True"),
            Err(ConfigError::UnknownKey { .. })
        ));
    }

    #[test]
    fn a_failed_apply_changes_nothing() {
        let mut c = AllocatorConfig::parse("max_split_size_mb:64").unwrap();
        let before = c.clone();
        assert!(c
            .apply("max_non_split_rounding_mb:40,no_such_key:1")
            .is_err());
        assert_eq!(c, before);
    }

    #[test]
    fn display_round_trips() {
        let c = AllocatorConfig::parse("expandable_segments:False,max_split_size_mb:40").unwrap();
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c);
        assert_eq!(AllocatorConfig::default().to_string(), "default");
    }
}
