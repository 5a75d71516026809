//! Session 48's sweep of hostile configuration strings (after
//! `hostile_sweep_s44.rs`): `AllocatorConfig::parse`, `reparse` and a live
//! allocator's `set_allocator_settings`.
//!
//! The earlier sweeps (`hostile_inputs*.rs`, `hostile_sweep_s27/32/43.rs`)
//! list bad values key by key. This file adds what they do not try:
//!
//! * degenerate strings of a million bytes (separators only, brackets only,
//!   a key or a value of a million characters, a hundred thousand repeated
//!   pairs, a list of a hundred thousand entries), each a quick typed result;
//! * a list of many distinct `expandable_segments_reserve_by_class` classes,
//!   which must parse in about linear time;
//! * property tests over strings built from the grammar's tokens (every key,
//!   unknown keys, hostile values: huge, negative, NaN, unicode, nested
//!   brackets, separators) and over arbitrary strings: the parser never
//!   panics, a configuration it accepts passes `validate` and survives its
//!   own `Display` form, a live allocator takes exactly the strings `reparse`
//!   accepts (and nothing else changes), and allocations under any accepted
//!   configuration give a block or a typed error.

use super::common::{sim, state};
use proptest::prelude::*;
use std::time::{Duration, Instant};
use strata_alloc::{AllocError, AllocatorConfig, ConfigError, Device, StreamId};

/// How long a degenerate string may take to be parsed. Generous (the test
/// machine is shared); a quadratic parser of a million-byte string takes far
/// longer.
const QUICK: Duration = Duration::from_secs(10);

/// Parses a configuration's `Display` form (`default` for the defaults,
/// which is no configuration string: the empty string is).
fn parse_display(c: &AllocatorConfig) -> Result<AllocatorConfig, ConfigError> {
    match c.to_string().as_str() {
        "default" => AllocatorConfig::parse(""),
        shown => AllocatorConfig::parse(shown),
    }
}

/// Parses `s`, checking it takes less than [`QUICK`].
fn timed_parse(what: &str, s: &str) -> Result<AllocatorConfig, ConfigError> {
    let t = Instant::now();
    let r = AllocatorConfig::parse(s);
    let took = t.elapsed();
    assert!(took < QUICK, "{what}: parsing took {took:?}");
    r
}

// ----- degenerate strings ------------------------------------------------------

/// A million separators, brackets or colons: a `Malformed` error (whitespace
/// only is the empty string: the defaults), each quickly.
#[test]
fn a_million_separators_are_malformed_quickly() {
    const N: usize = 1_000_000;
    for (what, s) in [
        ("commas", ",".repeat(N)),
        ("opening brackets", "[".repeat(N)),
        ("closing brackets", "]".repeat(N)),
        ("colons", ":".repeat(N)),
        ("comma-colon", ",:".repeat(N / 2)),
        ("brackets balanced", "[]".repeat(N / 2)),
    ] {
        match timed_parse(what, &s) {
            Err(ConfigError::Malformed { .. }) => {}
            other => panic!("{what}: expected Malformed, got {other:?}"),
        }
    }
    let ws = " \t\n\r\x0b\x0c".repeat(N / 6);
    assert_eq!(
        timed_parse("whitespace", &ws).unwrap(),
        AllocatorConfig::default()
    );
}

/// A key or a value of a million characters: `UnknownKey` / `BadValue`
/// naming it, quickly, and the value as written (not cut, not wrapped).
#[test]
fn a_million_character_key_or_value_is_a_typed_error() {
    const N: usize = 1_000_000;
    let key = "k".repeat(N);
    match timed_parse("long key", &format!("{key}:1")) {
        Err(ConfigError::UnknownKey { key: k }) => assert_eq!(k.len(), N),
        other => panic!("long key: {other:?}"),
    }
    // Digits whose number overflows every integer type, for each integer key.
    let digits = "9".repeat(N);
    for key in [
        "max_split_size_mb",
        "max_non_split_rounding_mb",
        "large_segment_size_mb",
        "pinned_num_register_threads",
        "pinned_reserve_segment_size_mb",
        "pinned_max_round_threshold_mb",
        "pinned_max_cached_size_mb",
        "roundup_power2_divisions",
    ] {
        match timed_parse(key, &format!("{key}:{digits}")) {
            Err(ConfigError::BadValue { key: k, value, .. }) => {
                assert_eq!(k, key);
                assert_eq!(value.len(), N);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    // A million-digit float is infinity (refused) or a number of the range.
    for key in [
        "garbage_collection_threshold",
        "per_process_memory_fraction",
        "expandable_segments_reserve",
    ] {
        assert!(
            matches!(
                timed_parse(key, &format!("{key}:{digits}")),
                Err(ConfigError::BadValue { .. })
            ),
            "{key}"
        );
    }
    // 0.000…01 (a million zeros) underflows to 0: refused where 0 is, and
    // refused as the fraction too, as PyTorch 2.15's `stod` throws
    // `out_of_range` on the underflow (checked with
    // `torch._C._accelerator_setAllocatorSettings`; hostile_sweep_s52.rs).
    let tiny = format!("0.{}1", "0".repeat(N));
    assert!(timed_parse("tiny gc", &format!("garbage_collection_threshold:{tiny}")).is_err());
    assert!(timed_parse(
        "tiny reserve",
        &format!("expandable_segments_reserve:{tiny}")
    )
    .is_err());
    assert!(timed_parse(
        "tiny fraction",
        &format!("per_process_memory_fraction:{tiny}")
    )
    .is_err());
}

/// A hundred thousand pairs naming the same keys over and over: accepted,
/// the last value of each key winning (as PyTorch's parser overwrites), and
/// quickly.
#[test]
fn a_hundred_thousand_repeated_pairs_parse_quickly() {
    let mut pieces = Vec::new();
    for i in 0..100_000u64 {
        pieces.push(format!("max_split_size_mb:{}", 20 + i % 1000));
        pieces.push(format!(
            "expandable_segments:{}",
            if i % 2 == 0 { "True" } else { "False" }
        ));
    }
    let c = timed_parse("repeated pairs", &pieces.join(",")).unwrap();
    assert_eq!(c.max_split_size, Some((20 + 99_999 % 1000) << 20));
    assert_eq!(c.expandable_segments, Some(false));
    c.validate().unwrap();
}

/// A `roundup_power2_divisions` list of a hundred thousand entries (keys
/// cycling over the intervals): accepted, quickly.
#[test]
fn a_hundred_thousand_division_entries_parse_quickly() {
    let items: Vec<String> = (0..100_000u64)
        .map(|i| format!("{}:{}", 1u64 << (i % 20), 1u64 << (i % 7)))
        .collect();
    let s = format!("roundup_power2_divisions:[{}]", items.join(","));
    let c = timed_parse("long division list", &s).unwrap();
    c.validate().unwrap();
    assert!(c
        .roundup_power2_divisions
        .iter()
        .all(|d| d.is_power_of_two()));
}

/// `expandable_segments_reserve_by_class` with 200 000 distinct classes (a
/// 2.6 MB string): accepted, one entry per class, in about linear time. (A
/// class named twice takes its last reserve; the parser found the earlier
/// entry by a scan of the list until session 48, quadratic in the number of
/// classes: 31.9 s for this string in a release build, now a look-up.)
#[test]
fn many_distinct_reserve_classes_parse_quickly() {
    let n = 200_000;
    let items: Vec<String> = (0..n).map(|i| format!("c{i}:0.5")).collect();
    let s = format!("expandable_segments_reserve_by_class:[{}]", items.join(","));
    let c = timed_parse("many classes", &s).unwrap();
    assert_eq!(c.expandable_segments_reserve_by_class.len(), n);
    c.validate().unwrap();
}

/// Unicode where the grammar has ASCII: a fullwidth colon or comma, a
/// no-break space inside a key, a right-to-left mark, a zero-width joiner,
/// combining marks, NUL: each a typed error, never a panic (the parser
/// slices the string at byte offsets of ASCII separators only).
#[test]
fn unicode_separators_and_marks_are_typed_errors() {
    for s in [
        "max_split_size_mb：64",
        "expandable_segments:True，max_split_size_mb:64",
        "max_split\u{a0}size_mb:64",
        "\u{200f}max_split_size_mb:64",
        "max_split_size_mb:6\u{200d}4",
        "max_split_size_mb:64\u{301}",
        "expandable_segments:True\u{0}",
        "\u{0}:\u{0}",
        "é:é",
        "roundup_power2_divisions:[1:2，4:4]",
        "roundup_power2_divisions:［1:2］",
        // `[é:0.5]` was here: PyTorch 2.15 takes `é` as a class name, and so
        // does strata since session 59 (hostile_s59.rs).
        "expandable_segments_reserve_by_class:[a:0.5Ｇ]",
        "🙂",
        "🙂:🙂,🙂",
    ] {
        let r = AllocatorConfig::parse(s);
        assert!(r.is_err(), "{s:?} accepted: {r:?}");
    }
}

/// Numbers at and past the edges, for the keys that take them: negative
/// zero, subnormals, a lone sign or exponent, `+` signs, `inf` spelled
/// out: accepted exactly when they are in the key's range, and an accepted
/// configuration validates.
#[test]
fn edge_numbers_are_in_range_or_refused() {
    for (s, ok) in [
        ("per_process_memory_fraction:-0", true),
        ("per_process_memory_fraction:-0.0e0", true),
        // `stod` range error (underflow) in PyTorch: hostile_sweep_s52.rs.
        ("per_process_memory_fraction:4.9e-324", false),
        ("per_process_memory_fraction:+1", true),
        ("per_process_memory_fraction:1.0000000000000001", true), // rounds to 1
        ("per_process_memory_fraction:+", false),
        ("per_process_memory_fraction:e5", false),
        ("per_process_memory_fraction:.", false),
        ("per_process_memory_fraction:infinity", false),
        ("per_process_memory_fraction:-nan", false),
        ("garbage_collection_threshold:4.9e-324", false), // stod underflow
        ("garbage_collection_threshold:0.99999999999999999", false), // rounds to 1
        ("garbage_collection_threshold:-0", false),
        ("expandable_segments_reserve:4.9e-324", true),
        ("expandable_segments_reserve:1e308G", true),
        ("expandable_segments_reserve:1e309G", false),
        ("expandable_segments_reserve:-0G", false),
        ("expandable_segments_reserve:NaNG", false),
        ("expandable_segments_reserve:G", false),
        ("expandable_segments_reserve:0.5GG", false),
        (
            "expandable_segments_reserve_by_class:[a:1e-320,b:1e300G]",
            true,
        ),
        ("expandable_segments_reserve_by_class:[a:0]", false),
        ("expandable_segments_reserve_by_class:[:0.5]", false),
        ("expandable_segments_reserve_by_class:[a]", false),
        ("expandable_segments_reserve_by_class:[a:0.5:0.5]", false),
        ("max_split_size_mb:+20", true),
        ("max_split_size_mb:-0", false),
        ("max_split_size_mb:18446744073709551615", true), // clamped, as PyTorch
        ("roundup_power2_divisions:9223372036854775808", true), // 2^63
        (
            "roundup_power2_divisions:[9223372036854775808:9223372036854775808]",
            true,
        ),
        ("roundup_power2_divisions:[>:0,>:0]", true),
        ("roundup_power2_divisions:[>]", false),
        ("pinned_num_register_threads:128", true),
        ("pinned_num_register_threads:+128", true),
        ("pinned_num_register_threads:-128", false),
        ("pinned_max_cached_size_mb:17592186044415", true), // 2^44 - 1 MiB
        ("pinned_max_cached_size_mb:17592186044416", true), // clamped, as PyTorch 2.15
        ("pinned_max_cached_size_mb:18446744073709551616", false), // 2^64 MiB: stoull throws
    ] {
        let r = AllocatorConfig::parse(s);
        assert_eq!(r.is_ok(), ok, "{s}: {r:?}");
        if let Ok(c) = r {
            c.validate()
                .unwrap_or_else(|e| panic!("{s}: parsed but invalid: {e}"));
            let again = parse_display(&c)
                .unwrap_or_else(|e| panic!("{s}: its Display form {c} is refused: {e}"));
            assert_eq!(again, c, "{s}: Display form {c}");
        }
    }
}

/// Device strings: `Device::parse` refuses hostile ones with a typed error,
/// and a parsed ordinal far beyond the machine's GPUs is a typed error from
/// the registry, not a wrapped ordinal (an `as i32` of 2^32 would be
/// `cuda:0`).
#[test]
fn hostile_device_strings_are_typed_errors() {
    for s in [
        "",
        " ",
        "cuda:",
        "cuda:-1",
        "cuda:+0",
        "cuda:00",
        "cuda:0x1",
        "cuda:1.0",
        "cuda:99999999999999999999999",
        "cuda:٣",
        "cuda:1:2",
        "cuda :1",
        "CUDA:0",
        "cpu:0",
        "cuda\u{0}:0",
        &"9".repeat(100_000),
    ] {
        assert!(
            matches!(Device::parse(s), Err(AllocError::InvalidDevice { .. })),
            "{s:?}: {:?}",
            Device::parse(s)
        );
    }
    for n in [1usize << 32, 1 << 31, usize::MAX] {
        let s = format!("cuda:{n}");
        let d = Device::parse(&s).unwrap();
        assert_eq!(d, Device::Cuda(n));
        // No machine has this many GPUs: a typed error (whatever this host's
        // driver), never device `n as i32`.
        let r = strata_alloc::allocator(d);
        assert!(r.is_err(), "{s}: an allocator was made");
    }
}

// ----- property tests ------------------------------------------------------------

/// Every key the parser knows, some spellings it must not know, and empty
/// or odd keys.
const KEYS: &[&str] = &[
    "expandable_segments",
    "max_split_size_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
    "per_process_memory_fraction",
    "max_non_split_rounding_mb",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "graph_capture_record_stream_reuse",
    "backend",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb",
    "throw_on_cudamalloc_oom",
    "large_segment_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "pinned_free_catch_all",
    "expandable_segments_reserve",
    "expandable_segments_reserve_by_class",
    "Expandable_segments",
    "max_split_size",
    "",
    " ",
    "é",
    "[",
];

/// Values: valid ones of every kind, and hostile ones.
const VALUES: &[&str] = &[
    "True",
    "False",
    "true",
    "0",
    "1",
    "2",
    "3",
    "11",
    "20",
    "21",
    "64",
    "128",
    "1024",
    "0.5",
    "0.999",
    "1",
    "1.5",
    "-1",
    "-0",
    "+4",
    "NaN",
    "inf",
    "-inf",
    "1e-320",
    "1e308",
    "1e309",
    "18446744073709551615",
    "18446744073709551616",
    "17592186044415",
    "9223372036854775808",
    "99999999999999999999999999",
    "0x10",
    "８",
    "native",
    "cudaMallocAsync",
    "40G",
    "0.25g",
    "G",
    "[]",
    "[,]",
    "[1:2]",
    "[1:2,>:4]",
    "[>:0]",
    "[1:3]",
    "[0:2]",
    "[9223372036854775808:2]",
    "[a:0.5,b:8G,a:0.25]",
    "[a:0.5",
    "[[1:2]]",
    "]",
    "[",
    "",
    ":",
    ",",
    "🙂",
];

/// Pairs that are valid on their own (so that accepted strings of several
/// pairs are frequent enough to check what is accepted).
const VALID: &[&str] = &[
    "expandable_segments:True",
    "expandable_segments:False",
    "max_split_size_mb:20",
    "max_split_size_mb:64",
    "max_split_size_mb:18446744073709551615",
    "max_non_split_rounding_mb:40",
    "max_non_split_rounding_mb:18446744073709551615",
    "large_segment_size_mb:11",
    "large_segment_size_mb:64",
    "large_segment_size_mb:18446744073709551615",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:9223372036854775808",
    "roundup_power2_divisions:[1:2,>:4]",
    "roundup_power2_divisions:[256:1,512:2,>:8]",
    "roundup_power2_divisions:[>:0]",
    "roundup_power2_divisions:[]",
    "garbage_collection_threshold:0.5",
    "garbage_collection_threshold:1e-320",
    "per_process_memory_fraction:0",
    "per_process_memory_fraction:-0",
    "per_process_memory_fraction:0.3",
    "per_process_memory_fraction:1",
    "release_lock_on_cudamalloc:True",
    "graph_capture_record_stream_reuse:True",
    "backend:native",
    "pinned_use_cuda_host_register:True",
    "pinned_num_register_threads:128",
    "pinned_use_background_threads:True",
    "pinned_reserve_segment_size_mb:1",
    "throw_on_cudamalloc_oom:True",
    "pinned_max_round_threshold_mb:0",
    "pinned_max_cached_size_mb:17592186044415",
    "pinned_free_catch_all:True",
    "expandable_segments_reserve:0.5",
    "expandable_segments_reserve:1e-320",
    "expandable_segments_reserve:1e300G",
    "expandable_segments_reserve_by_class:[a:0.5,b:8G,a:0.25]",
    "expandable_segments_reserve_by_class:[]",
];

/// A configuration string from the tokens: pairs (valid ones, or any key
/// with any value, or bare keys or values) joined by separators that
/// include the malformed ones.
fn config_string() -> impl Strategy<Value = String> {
    let any_pair = (
        0..KEYS.len(),
        0..VALUES.len(),
        prop_oneof![
            8 => Just(":"),
            1 => Just(""),
            1 => Just("::"),
            1 => Just(" : "),
        ],
    )
        .prop_map(|(k, v, sep)| format!("{}{sep}{}", KEYS[k], VALUES[v]));
    let piece = prop_oneof![
        1 => (0..VALID.len()).prop_map(|i| VALID[i].to_string()),
        1 => any_pair,
    ];
    let join = prop_oneof![
        8 => Just(","),
        1 => Just(",,"),
        1 => Just(", "),
        1 => Just(""),
    ];
    (
        proptest::collection::vec((piece, join), 0..6),
        any::<bool>(),
    )
        .prop_map(|(pieces, trailing)| {
            let mut s = String::new();
            for (i, (p, j)) in pieces.iter().enumerate() {
                if i > 0 {
                    s.push_str(j);
                }
                s.push_str(p);
            }
            if trailing {
                s.push(',');
            }
            s
        })
}

/// What every accepted configuration must satisfy: it validates, its
/// `Display` form parses back to it, and allocations of every size class
/// under it on a simulated 16 GiB device give blocks or typed errors, with
/// the allocator consistent afterwards.
fn check_accepted(s: &str, c: &AllocatorConfig) -> Result<(), TestCaseError> {
    prop_assert!(c.validate().is_ok(), "{s:?} parsed to an invalid {c:?}");
    let shown = c.to_string();
    match parse_display(c) {
        Ok(back) => prop_assert_eq!(&back, c, "{:?}: Display form {}", s, shown),
        Err(e) => prop_assert!(false, "{s:?}: Display form {shown} is refused: {e}"),
    }
    let a = strata_alloc::CachingAllocator::new(
        std::sync::Arc::new(strata_alloc::driver::sim::SimDriver::new(1 << 34, 2 << 20)),
        c.clone(),
    );
    let mut live = Vec::new();
    for size in [
        0u64,
        1,
        512,
        1 << 20,
        (1 << 20) + 1,
        21 << 20,
        1 << 30,
        20 << 30,
    ] {
        match a.allocate(size, StreamId::DEFAULT) {
            Ok(x) => live.push(x),
            Err(
                AllocError::OutOfMemory(_)
                | AllocError::TooLarge { .. }
                | AllocError::OomRejected { .. },
            ) => {}
            Err(e) => prop_assert!(false, "{s:?}: allocate({size}): unexpected {e:?}"),
        }
    }
    drop(live);
    prop_assert!(a.check_consistency().is_ok(), "{s:?}");
    a.empty_cache().unwrap();
    prop_assert!(a.check_consistency().is_ok(), "{s:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(super::common::cases(384)))]

    /// Strings from the grammar's tokens: `parse` never panics; what it
    /// accepts satisfies [`check_accepted`]; an error is one of the three
    /// kinds and names the key when it is a bad value.
    #[test]
    fn grammar_strings_parse_or_fail_typed(s in config_string()) {
        match AllocatorConfig::parse(&s) {
            Ok(c) => check_accepted(&s, &c)?,
            Err(ConfigError::BadValue { key, .. }) => {
                prop_assert!(s.contains(key) || s.contains("hipmalloc")
                    || s.contains("hip_host") || s.contains("device_"), "{s:?}: {key}");
            }
            Err(ConfigError::UnknownKey { .. } | ConfigError::Malformed { .. }) => {}
        }
    }

    /// The same strings given to a live allocator: `set_allocator_settings`
    /// succeeds exactly when `reparse` of its configuration does, installs
    /// that configuration, and a refusal changes nothing (settings,
    /// statistics, segments, memory fraction).
    #[test]
    fn grammar_strings_on_a_live_allocator(first in config_string(), s in config_string()) {
        let a = sim("max_split_size_mb:64,per_process_memory_fraction:0.75");
        // A first string (accepted or not) to start from a varied state.
        let _ = a.set_allocator_settings(&first);
        let keep = a.allocate(3 << 20, StreamId::DEFAULT).ok();
        let before = state(&a);
        let expected = a.config().reparse(&s);
        let r = a.set_allocator_settings(&s);
        prop_assert_eq!(r.is_ok(), expected.is_ok(), "{:?}: {:?} vs {:?}", s, r, expected);
        match expected {
            Ok(c) => {
                prop_assert_eq!(&a.config(), &c, "{:?}", s);
                prop_assert!(c.validate().is_ok(), "{:?}: {:?}", s, c);
            }
            Err(_) => {
                prop_assert!(matches!(r, Err(AllocError::Config(_))), "{:?}: {:?}", s, r);
                prop_assert!(state(&a) == before, "{:?}: a refused string changed the allocator", s);
            }
        }
        drop(keep);
        prop_assert!(a.check_consistency().is_ok(), "{:?}", s);
    }

    /// Arbitrary strings (any Unicode, control characters included): a
    /// typed result, never a panic; what is accepted validates.
    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,64}|[\\[\\]:, a-z_0-9.>G-]{0,64}") {
        if let Ok(c) = AllocatorConfig::parse(&s) {
            check_accepted(&s, &c)?;
        }
    }
}
