//! The `HPVM_MGPU_STATS=1` report, printed to stderr at `__hpvm__cleanup`.

use crate::memory;
use crate::module;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

pub static LAUNCHES: AtomicU64 = AtomicU64::new(0);
pub static STREAM_ITEMS: AtomicU64 = AtomicU64::new(0);

pub fn enabled() -> bool {
    std::env::var("HPVM_MGPU_STATS").is_ok_and(|v| !v.is_empty() && v != "0")
}

pub fn report() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hpvm-mgpu stats: {} launches, {} stream items, devices {} ({} worker threads)",
        LAUNCHES.load(Ordering::Relaxed),
        STREAM_ITEMS.load(Ordering::Relaxed),
        {
            let d = crate::device::devices();
            match &d.gpu {
                Some(g) => format!("cpu0 + GPU ({})", g.name),
                None => "cpu0".to_string(),
            }
        },
        crate::pool::pool().current_num_threads()
    );
    let _ = writeln!(s, "  {:<28} {:>10} {:>14} {:>12}", "node", "runs", "instances", "time ms");
    let mut modules = module::loaded();
    modules.sort_by(|a, b| a.program.source.cmp(&b.program.source));
    for m in modules {
        for (node, st) in m.program.nodes.iter().zip(&m.stats) {
            let runs = st.runs.load(Ordering::Relaxed);
            if runs == 0 {
                continue;
            }
            let _ = write!(
                s,
                "  {:<28} {:>10} {:>14} {:>12.3}",
                node.name,
                runs,
                st.instances.load(Ordering::Relaxed),
                st.nanos.load(Ordering::Relaxed) as f64 / 1e6
            );
            let mut ms = st.kernel_ms.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if !ms.is_empty() {
                ms.sort_by(f32::total_cmp);
                let total: f32 = ms.iter().sum();
                let _ =
                    write!(s, "   GPU: {} kernels, median {:.4} ms, total {:.4} ms", ms.len(), ms[ms.len() / 2], total);
            }
            if let Some(n) = m.analysis.as_ref().and_then(|db| db.node(&node.name)) {
                let _ = match n.split.dims.first() {
                    Some(d) if n.partitionable => {
                        write!(s, "   analysis: partitionable along {}", ["x", "y", "z"][*d as usize])
                    }
                    _ => write!(s, "   analysis: not partitionable"),
                };
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "  bytes moved: host->device {}, device->host {}; requested by the host {}",
        memory::BYTES_TO_DEVICE.load(Ordering::Relaxed),
        memory::BYTES_TO_HOST.load(Ordering::Relaxed),
        memory::BYTES_REQUESTED.load(Ordering::Relaxed)
    );
    s
}
