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
//! The number of devices is `HPVM_MGPU_DEVICES=dry:N` (default `dry:8`);
//! `scripts/bench-runtime` runs 2, 4, 8 and 16 and records the results in `bench/results/`.
//! The programs are the descriptions `hpvm-mgpu build` embeds for `examples/stencil2d.c` and
//! `examples/matmul.c` (in `benches/data/`, with their analysis databases).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hpvm_runtime::ctx::{GridBox, NodeCtx};
use hpvm_runtime::launch::{bench_forget, bench_launch, load, Loaded};
use hpvm_runtime::memory;
use hpvm_runtime::partitioned::Forget;
use std::ffi::CString;

/// Leaves never run on dry-run devices; the module still needs an entry point per leaf.
unsafe extern "C" fn never_runs(_: *const u8, _: *const NodeCtx, _: *const GridBox, _: *mut u8) {
    unreachable!("dry-run devices run nothing")
}

fn module(json: &str) -> &'static Loaded {
    let desc: &'static CString = Box::leak(Box::new(CString::new(json).unwrap()));
    let entries: &'static [hpvm_runtime::ctx::EntryFn; 1] = Box::leak(Box::new([never_runs as _]));
    // SAFETY: NUL-terminated description and one entry point, both leaked (live forever).
    unsafe { load(desc.as_ptr(), entries.as_ptr(), 1, std::ptr::null()) }
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
        let mut flip = false;
        g.bench_function(BenchmarkId::new("hit", n), |bch| {
            bch.iter(|| {
                flip = !flip;
                launch(if flip { &forward } else { &backward })
            })
        });
        for (name, what) in [("miss", Forget::Plans), ("plan", Forget::Intervals), ("cold", Forget::All)] {
            g.bench_function(BenchmarkId::new(name, n), |bch| {
                bch.iter(|| {
                    bench_forget(m, what);
                    launch(&forward)
                })
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
        g.bench_function(BenchmarkId::new("scalars", n), |bch| {
            bch.iter(|| {
                bench_forget(m, Forget::Plans);
                k += 1;
                launch(&rows(k))
            })
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
        g.bench_function(BenchmarkId::new("hit", n), |bch| bch.iter(launch));
        for (name, what) in [("miss", Forget::Plans), ("plan", Forget::Intervals), ("cold", Forget::All)] {
            g.bench_function(BenchmarkId::new(name, n), |bch| {
                bch.iter(|| {
                    bench_forget(m, what);
                    launch()
                })
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
    let devices = hpvm_runtime::devices::devices();
    assert!(devices.sims.first().is_some_and(|d| d.is_dry()), "HPVM_MGPU_DEVICES must be dry:N");
    eprintln!("runtime overhead on {}", devices.describe());
    stencil(c, module(include_str!("data/stencil2d.program.json")));
    matmul(c, module(include_str!("data/matmul.program.json")));
}

criterion_group!(name = launch; config = Criterion::default().sample_size(20); targets = benches);
criterion_main!(launch);
