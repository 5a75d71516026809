//! A self-contained HTML memory report: one file, no network, inline SVG and a
//! few lines of script.
//!
//! * **Memory over time**: live bytes stacked by call site (the top sites, the
//!   rest merged), the peak within each time bucket, and reserved bytes, from
//!   the recorded history aggregated into at most [`BUCKETS`] buckets, so a
//!   history of a million events stays a few hundred points.
//! * **Largest live allocations** with their call sites, and live bytes by
//!   call site.
//! * **Segment map**: every segment (the largest [`MAX_SEGMENTS`]) as a bar of
//!   its blocks, allocated, pending and free, with each segment's free bytes
//!   and largest free block; and the fragmentation per pool and stream.
//!
//! Elements the checks look for: `<svg id="timeline">` with one
//! `<path class="series" data-site=…>` per series and
//! `<polyline id="reserved">`; `<table id="top-allocations">` with one
//! `<tr class="alloc">` per allocation; `<svg id="segments">` with one
//! `<g class="segment">` per segment.
//!
//! ```
//! use std::sync::Arc;
//! use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
//! use strata_alloc::driver::sim::SimDriver;
//!
//! let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
//! a.record_history(Some(10_000));
//! let _x = a.allocate(1 << 20, StreamId::DEFAULT).unwrap();
//! let html = a.memory_report_html();
//! assert!(html.contains("<svg id=\"timeline\""));
//! assert_eq!(html.matches("<tr class=\"alloc\"").count(), 1);
//! ```

mod timeline;

use crate::driver::Device;
use crate::history::CallSite;
use crate::snapshot::{segments, BlockState};
use crate::state::State;
use crate::stats::format_size;
use std::fmt::Write;

/// Time buckets of the memory-over-time chart.
pub const BUCKETS: usize = 400;
/// Call sites drawn apart in the chart (the rest are merged).
pub const TOP_SITES: usize = 10;
/// Rows of the largest-allocations table.
pub const TOP_ALLOCATIONS: usize = 25;
/// Segments drawn in the segment map (the largest).
pub const MAX_SEGMENTS: usize = 200;

const COLORS: [&str; 11] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6", "#bab0ac",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn site_label(site: Option<CallSite>, other: &str) -> String {
    site.map_or_else(|| other.to_string(), |s| s.to_string())
}

/// The report of an allocator's state and history.
pub(crate) fn render(st: &State, device: Device) -> String {
    let mut h = String::with_capacity(64 << 10);
    let stats = &st.stats;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>strata memory report: {device}</title>\n<style>{CSS}</style></head><body>\n<h1>strata memory report: {device}</h1>\n<p class=\"summary\">allocated {} (peak {}), reserved {} (peak {}), {} live allocations, {} OOMs; settings: {}</p>\n",
        format_size(stats.allocated_bytes.all().current as u64),
        format_size(stats.allocated_bytes.all().peak as u64),
        format_size(stats.reserved_bytes.all().current as u64),
        format_size(stats.reserved_bytes.all().peak as u64),
        stats.allocation.all().current,
        stats.num_ooms,
        esc(&{
            let c = st.settings.config.to_string();
            if c.is_empty() { "defaults".to_string() } else { c }
        }),
    );
    timeline_section(&mut h, st);
    allocations_section(&mut h, st);
    segments_section(&mut h, st);
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body></html>\n");
    h
}

fn timeline_section(h: &mut String, st: &State) {
    h.push_str("<h2>Memory over time</h2>\n");
    if !st.history.enabled() {
        h.push_str("<p class=\"note\">History was off: call record_history before the run to see memory over time by call site.</p>\n");
        return;
    }
    let t = timeline::aggregate(st, st.reserved(), BUCKETS, TOP_SITES);
    let (w, ht, left, bottom) = (1000.0f64, 320.0f64, 70.0f64, 24.0f64);
    let n = t.times.len();
    let ymax = t
        .reserved
        .iter()
        .chain(&t.peak)
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |i: usize| left + (w - left - 10.0) * (i as f64 + 1.0) / n.max(1) as f64;
    let y = |v: u64| (ht - bottom) - (ht - bottom - 10.0) * v as f64 / ymax;
    let _ = writeln!(
        h,
        "<p class=\"note\">{} events in {} time buckets over {:.3} s; live bytes are the callers' sizes, stacked by call site.</p>",
        t.events,
        n,
        t.times.last().copied().unwrap_or(0) as f64 / 1e6
    );
    let _ = writeln!(
        h,
        "<svg id=\"timeline\" viewBox=\"0 0 {w} {ht}\" width=\"{w}\" height=\"{ht}\">"
    );
    // Axis labels.
    for k in 0..=4 {
        let v = (ymax * k as f64 / 4.0) as u64;
        let _ = writeln!(
            h,
            "<text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><line class=\"grid\" x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            left - 4.0,
            y(v) + 4.0,
            format_size(v),
            w - 10.0,
            y(v),
            y(v)
        );
    }
    // Stacked areas, bottom to top.
    let mut base = vec![0u64; n];
    for (si, s) in t.series.iter().enumerate() {
        let top: Vec<u64> = base.iter().zip(&s.values).map(|(b, v)| b + v).collect();
        let mut d = String::new();
        let _ = write!(d, "M{:.1},{:.1}", left, y(base[0]));
        for (i, v) in top.iter().enumerate() {
            let _ = write!(d, "L{:.1},{:.1}", x(i), y(*v));
        }
        for i in (0..n).rev() {
            let _ = write!(d, "L{:.1},{:.1}", x(i), y(base[i]));
        }
        d.push('Z');
        let label = esc(&site_label(s.site, "other call sites"));
        let _ = writeln!(
            h,
            "<path class=\"series\" data-site=\"{label}\" fill=\"{}\" d=\"{d}\"><title>{label}: up to {}</title></path>",
            COLORS[si % COLORS.len()],
            format_size(s.values.iter().copied().max().unwrap_or(0))
        );
        base = top;
    }
    let line = |v: &[u64]| -> String {
        v.iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        h,
        "<polyline id=\"peak\" class=\"line\" stroke=\"#333\" stroke-dasharray=\"3,3\" points=\"{}\"><title>peak live bytes within each bucket</title></polyline>",
        line(&t.peak)
    );
    let _ = writeln!(
        h,
        "<polyline id=\"reserved\" class=\"line\" stroke=\"#c00\" points=\"{}\"><title>reserved bytes</title></polyline>",
        line(&t.reserved)
    );
    h.push_str("</svg>\n<ul class=\"legend\">\n");
    for (si, s) in t.series.iter().enumerate() {
        let _ = writeln!(
            h,
            "<li data-site=\"{0}\"><span style=\"background:{1}\"></span>{0}</li>",
            esc(&site_label(s.site, "other call sites")),
            COLORS[si % COLORS.len()]
        );
    }
    h.push_str("<li><span style=\"background:#c00\"></span>reserved</li><li><span style=\"background:#333\"></span>peak live (dashed)</li></ul>\n");
}

fn allocations_section(h: &mut String, st: &State) {
    h.push_str("<h2>Largest live allocations</h2>\n<table id=\"top-allocations\"><tr><th>address</th><th>block size</th><th>requested</th><th>stream</th><th>call site</th></tr>\n");
    let mut blocks: Vec<_> = segments(st)
        .into_iter()
        .flat_map(|s| {
            let stream = s.stream;
            s.blocks.into_iter().map(move |b| (stream, b))
        })
        .filter(|(_, b)| b.state == BlockState::ActiveAllocated)
        .collect();
    blocks.sort_by_key(|(_, b)| std::cmp::Reverse((b.size, b.address)));
    for (stream, b) in blocks.iter().take(TOP_ALLOCATIONS) {
        let _ = writeln!(
            h,
            "<tr class=\"alloc\"><td>{:#x}</td><td>{}</td><td>{}</td><td>{:#x}</td><td>{}</td></tr>",
            b.address,
            format_size(b.size),
            format_size(b.requested_size),
            stream.0,
            esc(&site_label(b.site, "(not recorded)"))
        );
    }
    h.push_str("</table>\n");
    if st.history.enabled() {
        h.push_str("<h3>Live bytes by call site</h3>\n<table id=\"by-site\"><tr><th>call site</th><th>allocations</th><th>bytes requested</th></tr>\n");
        for u in crate::watch::usage_by_site(st, TOP_ALLOCATIONS) {
            let _ = writeln!(
                h,
                "<tr class=\"site\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&site_label(u.site, "(before history was on)")),
                u.count,
                format_size(u.bytes)
            );
        }
        h.push_str("</table>\n");
    }
}

fn segments_section(h: &mut String, st: &State) {
    let mut segs = segments(st);
    h.push_str("<h2>Segments</h2>\n");
    let free_total: u64 = segs
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .sum();
    let largest = segs
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .max()
        .unwrap_or(0);
    let frag = if free_total == 0 {
        0.0
    } else {
        100.0 * (1.0 - largest as f64 / free_total as f64)
    };
    let _ = writeln!(
        h,
        "<p class=\"note\" id=\"fragmentation\">{} segments; free in cached blocks {}, largest free block {}: fragmentation {frag:.1}% (1 - largest / free).</p>",
        segs.len(),
        format_size(free_total),
        format_size(largest)
    );
    segs.sort_by_key(|s| std::cmp::Reverse((s.total_size, s.address)));
    segs.truncate(MAX_SEGMENTS);
    segs.sort_by_key(|s| s.address);
    let widest = segs.iter().map(|s| s.total_size).max().unwrap_or(1).max(1) as f64;
    let (w, row) = (1000.0f64, 18.0f64);
    let bar = w - 330.0;
    let _ = writeln!(
        h,
        "<svg id=\"segments\" viewBox=\"0 0 {w} {0}\" width=\"{w}\" height=\"{0}\">",
        row * segs.len().max(1) as f64
    );
    for (i, s) in segs.iter().enumerate() {
        let y0 = i as f64 * row;
        let scale = bar / widest;
        let seg_free: u64 = s
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size)
            .sum();
        let seg_largest = s
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size)
            .max()
            .unwrap_or(0);
        let _ = write!(
            h,
            "<g class=\"segment\" data-address=\"{:#x}\"><text class=\"axis\" x=\"0\" y=\"{:.1}\">{:#x} {} {}</text>",
            s.address,
            y0 + 13.0,
            s.address,
            s.segment_type,
            format_size(s.total_size)
        );
        for b in &s.blocks {
            let bx = 180.0 + (b.address - s.address) as f64 * scale;
            let bw = (b.size as f64 * scale).max(0.5);
            let (class, fill) = match b.state {
                BlockState::ActiveAllocated => ("allocated", "#4e79a7"),
                BlockState::ActivePendingFree => ("pending", "#edc948"),
                BlockState::Inactive => ("free", "#e8e8e8"),
            };
            let _ = write!(
                h,
                "<rect class=\"{class}\" x=\"{bx:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{fill}\"><title>{:#x} {} {}{}</title></rect>",
                y0 + 2.0,
                row - 4.0,
                b.address,
                format_size(b.size),
                b.state.name(),
                b.site.map(|c| format!(" at {}", esc(&c.to_string()))).unwrap_or_default()
            );
        }
        let _ = writeln!(
            h,
            "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\">free {} / largest {}</text></g>",
            180.0 + bar + 6.0,
            y0 + 13.0,
            format_size(seg_free),
            format_size(seg_largest)
        );
    }
    h.push_str("</svg>\n<ul class=\"legend\"><li><span style=\"background:#4e79a7\"></span>allocated</li><li><span style=\"background:#edc948\"></span>freed, waiting for other streams</li><li><span style=\"background:#e8e8e8\"></span>free (cached)</li></ul>\n");
}

const CSS: &str = "body{font-family:sans-serif;margin:20px;color:#222}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.axis{font-size:11px;fill:#555}.grid{stroke:#eee}.line{fill:none;stroke-width:1.5}.legend{list-style:none;padding:0;font-size:12px}.legend li{display:inline-block;margin-right:14px;cursor:pointer}.legend span{display:inline-block;width:10px;height:10px;margin-right:4px}.note{color:#555;font-size:13px}path.series.dim{opacity:.15}";

/// Clicking a legend entry highlights its series (the others dim); clicking
/// it again shows them all.
const SCRIPT: &str = "var shown=null;document.querySelectorAll('.legend li[data-site]').forEach(function(li){li.addEventListener('click',function(){var s=li.getAttribute('data-site');shown=(shown===s)?null:s;document.querySelectorAll('path.series').forEach(function(p){p.classList.toggle('dim',shown!==null&&p.getAttribute('data-site')!==shown);});});});";
