//! The settings of partitioned launches (`HPVM_MGPU_PARTITION`, `_PARTITIONS`, `_WEIGHTS`,
//! `_CHECK`), each read once, a bad one ending the program with a message; and the report of
//! accesses outside a buffer, which strict checking makes an error.

use super::policy;
use crate::devices::devices;
use std::sync::Mutex;

/// `HPVM_MGPU_PARTITIONS=K`: each device gets K partitions of a split launch (default 1).
pub(crate) fn partitions_per_device() -> usize {
    static K: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *K.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_PARTITIONS") else { return 1 };
        match v.trim().parse::<usize>() {
            Ok(k) if (1..=64).contains(&k) => k,
            _ => {
                crate::fatal(&format!("HPVM_MGPU_PARTITIONS={v}: expected a number of partitions per device, 1 to 64"))
            }
        }
    })
}

/// `HPVM_MGPU_ISL_OPERATIONS=N`: the most of ISL's operations one partition's plan may take
/// (0: no bound). Past it the launch runs whole, its statistics saying why
/// ([`super::split`]): a plan is never left to run for minutes.
pub(crate) fn isl_operations() -> u64 {
    static N: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_ISL_OPERATIONS") else { return DEFAULT_ISL_OPERATIONS };
        v.trim().parse::<u64>().unwrap_or_else(|_| {
            crate::fatal(&format!("HPVM_MGPU_ISL_OPERATIONS={v}: expected a number of operations (0: no bound)"))
        })
    })
}

/// [`isl_operations`]'s default, about 4 s of ISL on this project's CPU machine (about 2-3
/// million operations a second in a synthetic test over a 3-D convolution's maps, which took
/// 54 s unbounded); a partition of `examples/stencil2d.c`'s plan takes 10 000 to 30 000.
const DEFAULT_ISL_OPERATIONS: u64 = 10_000_000;

/// `HPVM_MGPU_WEIGHTS=w0,w1,...`: device `k` gets a share of a split launch proportional to
/// `wk` (default: equal shares). One weight per device, non-negative, not all zero.
pub(crate) fn device_weight(k: usize) -> f64 {
    static W: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let w = W.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_WEIGHTS") else { return Vec::new() };
        let n = devices().count();
        let parsed: Option<Vec<f64>> = v.split(',').map(|x| x.trim().parse::<f64>().ok()).collect();
        match parsed {
            Some(w) if w.len() == n && w.iter().all(|x| x.is_finite() && *x >= 0.0) && w.iter().any(|x| *x > 0.0) => w,
            _ => crate::fatal(&format!(
                "HPVM_MGPU_WEIGHTS={v}: expected {n} comma-separated non-negative weights, one per device, not all zero"
            )),
        }
    });
    w.get(k).copied().unwrap_or(1.0)
}

/// `HPVM_MGPU_PARTITION=off`: every unit runs whole on device 0.
pub(crate) fn partitioning_off() -> bool {
    policy::mode() == policy::Mode::Off
}

/// `HPVM_MGPU_MERGE=off`: a node whose writes are merged (dashdb's `WriteKind::Merged`) runs
/// whole, as the analysis could not place its writes.
pub(crate) fn merging_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| match std::env::var("HPVM_MGPU_MERGE").unwrap_or_default().trim() {
        "" | "on" | "1" => false,
        "off" | "0" => true,
        other => crate::fatal(&format!("HPVM_MGPU_MERGE={other}: expected `on` or `off`")),
    })
}

/// `HPVM_MGPU_CHECK=strict`: an access outside a buffer is an error, not a warning.
pub(crate) fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| match std::env::var("HPVM_MGPU_CHECK").unwrap_or_default().trim() {
        "" | "warn" => false,
        "strict" => true,
        other => crate::fatal(&format!("HPVM_MGPU_CHECK={other}: expected `warn` or `strict`")),
    })
}

/// Reports, once per node and buffer, that a launch's accesses reach outside the buffer.
pub(crate) fn report_outside(node: &str, loc: &str, arg: &str, what: &str, first: i64, end: i64, len: i64) {
    static SAID: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let outside = if first < 0 {
        format!("elements {first}..{} before its start", end.min(0))
    } else {
        format!("elements {}..{end} past its end", first.max(len))
    };
    let msg = format!("node {node} ({loc}) {what} {outside}: `{arg}` has {len} elements from where it points");
    if strict() {
        crate::fatal(&format!("{msg} (HPVM_MGPU_CHECK=strict)"));
    }
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|(n, a)| n == node && a == arg) {
        said.push((node.to_string(), arg.to_string()));
        eprintln!(
            "hpvm-mgpu: warning: {msg}; copies are clipped to the buffer (HPVM_MGPU_CHECK=strict makes this an error)"
        );
    }
}
