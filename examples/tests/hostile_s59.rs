//! Session 59's hostile command lines for the `trace_gap` example: each bad
//! one is refused with a message that says what to do and exit status 2;
//! a gzipped trace (the form of `traces/*.json.gz`) is read. Before: a
//! `--conf` without its string was taken for a file named `--conf` ("No
//! such file"), a second trace and unknown options were ignored or taken
//! for files, a gzipped trace failed with "stream did not contain valid
//! UTF-8", and a trace with no allocation reported a peak at event 0.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

fn trace_gap() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/trace_gap
    let exe = std::env::current_exe().expect("test path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join("trace_gap")
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-trace-gap-s59-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `trace_gap` with `args`: (exit status, stdout, stderr).
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(trace_gap()).args(args).output().expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TRACE: &str = r#"{"events": [["alloc", 4096, 3000000, 0], ["alloc", 8192, 1000, 0], ["free_completed", 4096, 3000000, 0], ["alloc", 4096, 5000000, 0]]}"#;

#[test]
fn a_gzipped_trace_is_read_like_a_plain_one() {
    let d = dir();
    let plain = d.join("t.json");
    std::fs::write(&plain, TRACE).unwrap();
    let gz = d.join("t.json.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(TRACE.as_bytes()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let a = run(&[plain.to_str().unwrap()]);
    let b = run(&[gz.to_str().unwrap()]);
    assert_eq!(a.0, Some(0), "{}", a.2);
    assert!(a.1.contains("reserved peaks at"), "{}", a.1);
    assert_eq!(b, a, "the same report from the gzipped file");
}

#[test]
fn bad_command_lines_and_files_are_refused_with_what_to_do() {
    let d = dir();
    let t = d.join("ok.json");
    std::fs::write(&t, TRACE).unwrap();
    let t = t.to_str().unwrap();
    let none = d.join("none.json");
    std::fs::write(
        &none,
        r#"{"events": [["free_completed", 1, 2, 0], ["alloc", 8, 0, 0]]}"#,
    )
    .unwrap();
    let junk = d.join("junk.bin");
    std::fs::write(&junk, [0xffu8, 0xfe, 0x00, 0x80]).unwrap();
    let damaged = d.join("damaged.json.gz");
    std::fs::write(&damaged, [0x1fu8, 0x8b, 0x08, 0x00, 0x01]).unwrap();
    for (args, says) in [
        (vec![], "usage"),
        (vec!["--conf"], "--conf needs a settings string"),
        (vec![t, "--conf"], "--conf needs a settings string"),
        (vec!["--conf", "bogus:1", t], "--conf"),
        (vec![t, t], "one trace at a time"),
        (vec!["--passes", "3", t], "unknown option '--passes'"),
        (vec![none.to_str().unwrap()], "allocates nothing"),
        (vec![junk.to_str().unwrap()], "neither gzip nor UTF-8"),
        (vec![damaged.to_str().unwrap()], "damaged gzip"),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `train`, `leaks` and `memory_report` take no argument; one given was
/// ignored (the run went ahead as if none were), and is now refused with
/// exit status 2 and a message naming it and `STRATA_DEVICE`, before any
/// work (nothing is written to the working directory).
#[test]
fn examples_without_arguments_refuse_one() {
    let d = dir().join("no-args");
    std::fs::create_dir_all(&d).unwrap();
    for ex in ["train", "leaks", "memory_report"] {
        let exe = trace_gap().with_file_name(ex);
        for arg in ["--steps", "extra"] {
            let out = Command::new(&exe)
                .arg(arg)
                .env("STRATA_DEVICE", "cpu")
                .current_dir(&d)
                .output()
                .expect("runs");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{ex} {arg}: {err}");
            assert!(
                err.contains(arg) && err.contains("STRATA_DEVICE"),
                "{ex} {arg}: {err}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "nothing written");
}
