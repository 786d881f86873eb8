//! What watching host writes costs (`memory::watch`), against what it saves: sending a
//! buffer again at every launch (HPVM's rule when writes are not watched).
//!
//! Cases, on a 1 GiB buffer of its own mapping:
//! - `scan/clean`: a launch's look at a buffer the host did not write (the pagemap scan);
//! - `scan/written-4096-pages`: the host wrote 4096 pages (16 MiB) since the last look: their
//!   first writes fault once each (the kernel lifts the protection), then the look finds and
//!   protects them again;
//! - `resend/memcpy`: copying the buffer once, the least a resend to a simulated device costs
//!   (to a GPU it is a transfer over PCIe or NVLink, at tens of GB/s).
//!
//! `cargo bench -p runtime --bench watch`; skipped with a message where the kernel lacks the
//! mechanism.

use criterion::{criterion_group, criterion_main, Criterion};
use hpvm_runtime::memory::watch;

const SIZE: usize = 1 << 30;

fn bench(c: &mut Criterion) {
    let w = match watch::watcher() {
        Ok(w) => w,
        Err(why) => {
            eprintln!("watch benchmarks skipped: {why}");
            return;
        }
    };
    let mut buf = vec![1u8; SIZE];
    let start = buf.as_ptr() as u64;
    assert!(w.watch(start, SIZE as u64), "the kernel refused to watch the buffer");
    let mut g = c.benchmark_group("watch-1GiB");
    g.sample_size(10);
    g.bench_function("scan/clean", |b| b.iter(|| w.written(start, SIZE as u64)));
    g.bench_function("scan/written-4096-pages", |b| {
        b.iter(|| {
            for p in 0..4096 {
                // SAFETY: inside the buffer (one page in 64); volatile so the stores stay.
                unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(p * (SIZE / 4096)), 2) };
            }
            w.written(start, SIZE as u64)
        })
    });
    let mut copy = vec![0u8; SIZE];
    g.bench_function("resend/memcpy", |b| b.iter(|| copy.copy_from_slice(&buf)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
