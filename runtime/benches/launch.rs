//! The runtime's own work per partitioned launch (the Mekong thesis's "runtime overhead"),
//! on dry-run devices: the runtime plans, caches, picks copies and updates coherence maps
//! exactly as for real devices, but allocates, copies and runs nothing, so only its own
//! work is timed, at sizes (N up to 32768) whose buffers need not exist.
//!
//! Cases, for stencil2d (two launches alternating between two buffers) and matmul:
//! - `hit`: a launch whose plan and copy plan come from the caches (a steady-state loop);
//! - `miss`: a launch whose plan is computed, with access intervals already known (a new
//!   launch key of known shapes, such as new buffers);
//! - `scalars`: a launch whose plan is computed for a new value of a scalar the maps name,
//!   from the maps' closed forms (issue 40's plan miss: at most 50 µs at 8 devices);
//! - `plan`: a launch computing its access intervals with ISL from the maps the runtime
//!   parsed when the module was loaded (the first launch of a node in a program);
//! - `cold`: the same, parsing the database's text first.
//!
//! And for `tests/cuda/eliminate.cu`, a Gaussian elimination whose two kernels' maps name the
//! pivot row: each launch of `multipliers` or `update` is a plan miss for a new row, planned
//! from closed forms (the worst case of issue 40's 50 µs).
//!
//! Every launch is split over all the devices (`HPVM_MGPU_PARTITION=always` unless set: the
//! split policy would run dry-run kernels, which take no time, whole on one device).
//! The number of devices is `HPVM_MGPU_DEVICES=dry:N` (default `dry:8`);
//! `scripts/bench-runtime` runs 2, 4, 8 and 16 and records the results in `bench/results/`.
//! The programs are the descriptions `hpvm-mgpu build` embeds for `examples/stencil2d.c`,
//! `examples/matmul.c` and `tests/cuda/eliminate.cu` (in `benches/data/`, with their analysis
//! databases; built from the repository's root).
//!
//! On a machine shared with noisy neighbours, `LAUNCH_BENCH_BATCHES=9` measures without
//! criterion: each case in 9 batches, printing the least and the median per launch, which
//! alternating runs of two builds compare better than criterion's estimates.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hpvm_runtime::ctx::{GridBox, NodeCtx};
use hpvm_runtime::launch::{bench_forget, bench_launch, load, Loaded};
use hpvm_runtime::memory;
use hpvm_runtime::partitioned::Forget;
use std::ffi::CString;
use std::sync::atomic::Ordering::Relaxed;

/// Leaves never run on dry-run devices; the module still needs an entry point per leaf.
unsafe extern "C" fn never_runs(_: *const u8, _: *const NodeCtx, _: *const GridBox, _: *mut u8) {
    unreachable!("dry-run devices run nothing")
}

fn module(json: &str) -> &'static Loaded {
    let desc: &'static CString = Box::leak(Box::new(CString::new(json).unwrap()));
    // One entry point per leaf (the programs have at most two).
    let entries: &'static [hpvm_runtime::ctx::EntryFn; 2] = Box::leak(Box::new([never_runs as _; 2]));
    // SAFETY: NUL-terminated description and two entry points, both leaked (live forever).
    unsafe { load(desc.as_ptr(), entries.as_ptr(), 2, std::ptr::null()) }
}

/// Addresses of host buffers that are tracked but never touched (nothing is copied).
fn fake_buffer(k: u64, bytes: u64) -> u64 {
    let p = (0x2000 + k) << 36;
    memory::track(p as usize, bytes as usize);
    p
}

fn args(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Stops the bench unless node `node`'s launches so far ran split over every device: a
/// case measuring whole launches would report the wrong path's cost.
fn assert_split(m: &Loaded, node: u32) {
    let st = &m.module.stats[node as usize];
    let (split, over) = (st.partitioned.load(Relaxed), st.max_devices.load(Relaxed));
    let devices = hpvm_runtime::devices::devices().count() as u64;
    let all = over == devices && (split > 0 || devices == 1);
    assert!(all, "node {node}: {split} launches split, over at most {over} of {devices} devices");
}

/// Measures `f` as case `case`/`n` of group `g`: through criterion, or, with
/// `LAUNCH_BENCH_BATCHES=N` set, in N batches, printing the least and the median nanoseconds
/// per call (the least is what a noisy machine's A/B comparisons need: the other build's
/// runs met other neighbours). A batch is `cycle` calls where the case's work goes round
/// (the elimination's rows: every batch then does the same work), else as many as take
/// about 50 ms; a warm-up of one batch, or of a second, goes first (the first launches'
/// closed forms are made meanwhile).
fn measure(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    group: &str,
    (case, n): (&str, u64),
    cycle: Option<usize>,
    mut f: impl FnMut(),
) {
    let Some(batches) = std::env::var("LAUNCH_BENCH_BATCHES").ok().and_then(|v| v.parse::<usize>().ok()) else {
        g.bench_function(BenchmarkId::new(case, n), |bch| bch.iter(&mut f));
        return;
    };
    let name = format!("{group}/{case}/{n}");
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !name.contains(&filter) {
            return;
        }
    }
    let calls = match cycle {
        Some(calls) => {
            (0..calls).for_each(|_| f());
            calls
        }
        None => {
            let (t, mut warm) = (std::time::Instant::now(), 0usize);
            while t.elapsed().as_secs_f64() < 1.0 {
                f();
                warm += 1;
            }
            (0.05 * warm as f64 / t.elapsed().as_secs_f64()).clamp(1.0, 1e6) as usize
        }
    };
    let calls = std::env::var("LAUNCH_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(calls);
    let mut per_call: Vec<f64> = (0..batches.max(1)).map(|_| batch(calls, &mut f)).collect();
    per_call.sort_by(f64::total_cmp);
    println!(
        "{name} least {:.0} ns median {:.0} ns ({} x {calls})",
        per_call[0],
        per_call[per_call.len() / 2],
        per_call.len()
    );
}

/// Nanoseconds per call of `calls` calls of `f`. Never inlined, so that a count of
/// instructions can be limited to it (`valgrind --tool=callgrind --toggle-collect='*batch*'`,
/// with `LAUNCH_BENCH_CALLS` fixing the calls: instructions do not vary with the neighbours).
#[inline(never)]
fn batch(calls: usize, f: &mut impl FnMut()) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_nanos() as f64 / calls as f64
}

/// Node 1 of both programs is the launch unit (an internal node launched as 16 x 16 blocks).
const UNIT: u32 = 1;

fn stencil(c: &mut Criterion, m: &'static Loaded) {
    let mut g = c.benchmark_group("stencil2d");
    for n in [4096u64, 16384, 32768] {
        let bytes = n * n * 4;
        let (a, b) = (fake_buffer(2 * n, bytes), fake_buffer(2 * n + 1, bytes));
        let forward = args(&[a, bytes, b, bytes, n, n]);
        let backward = args(&[b, bytes, a, bytes, n, n]);
        let grid = [(n / 16) as i64, (n / 16) as i64, 1];
        let launch = |x: &Vec<u8>| assert!(bench_launch(m, UNIT, x.clone(), grid));
        for _ in 0..4 {
            launch(&forward);
            launch(&backward);
        }
        assert_split(m, UNIT);
        let mut flip = false;
        measure(&mut g, "stencil2d", ("hit", n), None, || {
            flip = !flip;
            launch(if flip { &forward } else { &backward })
        });
        for (name, what) in [("miss", Forget::Plans), ("plan", Forget::Intervals), ("cold", Forget::All)] {
            measure(&mut g, "stencil2d", (name, n), None, || {
                bench_forget(m, what);
                launch(&forward)
            });
        }
        // A new value of a scalar the maps name at every launch (the width the stencil covers):
        // planned from the maps' closed forms, which the first values made.
        let rows = |k: u64| args(&[a, bytes, b, bytes, n - 2 - k % (n / 2), n]);
        let mut k = 0;
        for _ in 0..3 {
            launch(&rows(k));
            k += 1;
        }
        measure(&mut g, "stencil2d", ("scalars", n), None, || {
            bench_forget(m, Forget::Plans);
            k += 1;
            launch(&rows(k))
        });
    }
    g.finish();
}

fn matmul(c: &mut Criterion, m: &'static Loaded) {
    let mut g = c.benchmark_group("matmul");
    for n in [4096u64, 16384, 32768] {
        let bytes = n * n * 4;
        let (a, b, cc) = (fake_buffer(3 * n, bytes), fake_buffer(3 * n + 1, bytes), fake_buffer(3 * n + 2, bytes));
        let x = args(&[a, bytes, b, bytes, cc, bytes, n]);
        let grid = [(n / 16) as i64, (n / 16) as i64, 1];
        let launch = || assert!(bench_launch(m, UNIT, x.clone(), grid));
        for _ in 0..3 {
            launch();
        }
        assert_split(m, UNIT);
        measure(&mut g, "matmul", ("hit", n), None, launch);
        for (name, what) in [("miss", Forget::Plans), ("plan", Forget::Intervals), ("cold", Forget::All)] {
            measure(&mut g, "matmul", (name, n), None, || {
                bench_forget(m, what);
                launch()
            });
        }
    }
    g.finish();
}

/// Nodes of `tests/cuda/eliminate.cu`'s description: the launch units of its two kernels.
const MULTIPLIERS: u32 = 1;
const UPDATE: u32 = 4;

/// Forward elimination's launches (issue 40's plan miss at its worst: two kernels per pivot
/// row `t`, and the maps name `t`): each launch a new row, planned from closed forms. The
/// rows go round, and the plans are forgotten first, so every launch misses.
fn eliminate(c: &mut Criterion, m: &'static Loaded) {
    let mut g = c.benchmark_group("eliminate");
    for n in [1024u64, 4096] {
        let (cells, rows) = (n * n * 4, n * 4);
        let (a, b, mm) = (fake_buffer(5 * n, cells), fake_buffer(5 * n + 1, rows), fake_buffer(5 * n + 2, cells));
        // `n` and `t` are 32-bit and share a word; blocks of 32 and of 8 x 8 threads, whole grids.
        let scalars = |t: u64| n | (t << 32);
        let multipliers = |t: u64| (args(&[a, cells, mm, cells, scalars(t), 32, 1, 1]), [n.div_ceil(32) as i64, 1, 1]);
        let update = |t: u64| {
            let grid = [n.div_ceil(8) as i64, n.div_ceil(8) as i64, 1];
            (args(&[a, cells, b, rows, mm, cells, scalars(t), 8, 8, 1]), grid)
        };
        for (name, node, make) in [
            ("multipliers", MULTIPLIERS, &multipliers as &dyn Fn(u64) -> (Vec<u8>, [i64; 3])),
            ("update", UPDATE, &update),
        ] {
            let launch = |t: u64| {
                let (x, grid) = make(t);
                assert!(bench_launch(m, node, x, grid));
            };
            // The first rows make the closed forms.
            for t in 0..3 {
                launch(t);
            }
            assert_split(m, node);
            // The rows go round 3..n - 2, from row 3: a batch of n - 4 launches is one pass.
            let mut t = n - 2;
            measure(&mut g, "eliminate", (name, n), Some(n as usize - 4), || {
                bench_forget(m, Forget::Plans);
                t = if t + 2 >= n { 3 } else { t + 1 };
                launch(t)
            });
        }
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    if std::env::var_os("HPVM_MGPU_DEVICES").is_none() {
        std::env::set_var("HPVM_MGPU_DEVICES", "dry:8");
    }
    // A plan miss is measured where the launch pays it: not sent to the background, as dry
    // devices otherwise do (they stand in for GPUs).
    if std::env::var_os("HPVM_MGPU_PLAN_AHEAD").is_none() {
        std::env::set_var("HPVM_MGPU_PLAN_AHEAD", "off");
    }
    // Every launch split over all the devices: the split policy keeps launches whole where
    // their kernels take nothing, which dry-run kernels do (measured at 0 ns), so under it
    // every case here ran on one device and measured the whole launch's path, not a split's.
    if std::env::var_os("HPVM_MGPU_PARTITION").is_none() {
        std::env::set_var("HPVM_MGPU_PARTITION", "always");
    }
    let devices = hpvm_runtime::devices::devices();
    assert!(devices.sims.first().is_some_and(|d| d.is_dry()), "HPVM_MGPU_DEVICES must be dry:N");
    eprintln!("runtime overhead on {}", devices.describe());
    stencil(c, module(include_str!("data/stencil2d.program.json")));
    matmul(c, module(include_str!("data/matmul.program.json")));
    eliminate(c, module(include_str!("data/eliminate.program.json")));
}

criterion_group!(name = launch; config = Criterion::default().sample_size(20); targets = benches);
criterion_main!(launch);
