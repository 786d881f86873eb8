//! The rows `scripts/device/scaling.sh` writes (one JSON object per run), gathered into one
//! point per (program, arguments, GPU count): the median of each figure over the repeats.

use serde::Deserialize;
use std::collections::BTreeMap;

/// One run, as recorded.
#[derive(Deserialize, Clone)]
pub struct Run {
    pub bench: String,
    pub args: String,
    pub gpus: u32,
    pub rc: i32,
    pub wall_s: f64,
    #[serde(default)]
    pub gpu_ms_host_copies: f64,
    #[serde(default)]
    pub gpu_ms_peer_copies: f64,
    #[serde(default)]
    pub gpu_ms_kernels: f64,
    #[serde(default)]
    pub ms_intervals: f64,
    #[serde(default)]
    pub ms_copy_planning: f64,
    #[serde(default)]
    pub ms_allocation: f64,
    #[serde(default)]
    pub ms_to_host: f64,
}

/// A results file: where and how the runs were made, and the runs.
#[derive(Deserialize)]
pub struct Results {
    pub device: String,
    /// A short name of the machine for titles (else `device`).
    #[serde(default)]
    pub title: Option<String>,
    pub commit: String,
    pub runs: Vec<Run>,
}

/// The medians of one configuration, in milliseconds (the thesis's breakdown).
#[derive(Clone, Debug)]
pub struct Point {
    pub bench: String,
    /// The problem size: the first argument.
    pub size: u64,
    pub gpus: u32,
    pub host_to_device: f64,
    /// Kernels and the copies between GPUs that resolve their dependencies.
    pub kernels_and_dependencies: f64,
    pub device_to_host: f64,
    /// The runtime's own work on the host: intervals, copy planning, allocations.
    pub overhead: f64,
    pub wall: f64,
}

impl Point {
    /// The runtime's share of the program: the four parts of the breakdown.
    pub fn runtime_share(&self) -> f64 {
        self.host_to_device + self.kernels_and_dependencies + self.device_to_host + self.overhead
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One point per configuration whose runs all succeeded; sorted by program, size, GPUs.
pub fn points(runs: &[Run]) -> Result<Vec<Point>, String> {
    let mut groups: BTreeMap<(String, u64, String, u32), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        if r.rc != 0 {
            return Err(format!(
                "{} {} on {} GPUs failed (exit {}): plot only successful runs",
                r.bench, r.args, r.gpus, r.rc
            ));
        }
        let size = r.args.split_whitespace().next().and_then(|a| a.parse().ok()).unwrap_or(0);
        groups.entry((r.bench.clone(), size, r.args.clone(), r.gpus)).or_default().push(r);
    }
    Ok(groups
        .into_iter()
        .map(|((bench, size, _args, gpus), rs)| {
            let m = |f: fn(&Run) -> f64| median(rs.iter().map(|r| f(r)).collect());
            Point {
                bench,
                size,
                gpus,
                host_to_device: m(|r| r.gpu_ms_host_copies),
                kernels_and_dependencies: m(|r| r.gpu_ms_kernels + r.gpu_ms_peer_copies),
                device_to_host: m(|r| r.ms_to_host),
                overhead: m(|r| r.ms_intervals + r.ms_copy_planning + r.ms_allocation),
                wall: m(|r| r.wall_s * 1e3),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(gpus: u32, kernels: f64, rc: i32) -> Run {
        Run {
            bench: "matmul".into(),
            args: "4096".into(),
            gpus,
            rc,
            wall_s: 1.0,
            gpu_ms_host_copies: 1.0,
            gpu_ms_peer_copies: 0.5,
            gpu_ms_kernels: kernels,
            ms_intervals: 0.1,
            ms_copy_planning: 0.1,
            ms_allocation: 0.1,
            ms_to_host: 2.0,
        }
    }

    #[test]
    fn medians_per_configuration() {
        let runs = [run(1, 10.0, 0), run(1, 30.0, 0), run(1, 20.0, 0), run(2, 6.0, 0), run(2, 4.0, 0)];
        let p = points(&runs).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].gpus, p[0].size), (1, 4096));
        assert_eq!(p[0].kernels_and_dependencies, 20.5);
        assert_eq!(p[1].kernels_and_dependencies, 5.5);
        assert!((p[0].overhead - 0.3).abs() < 1e-12);
        assert!(points(&[run(2, 1.0, 1)]).is_err_and(|e| e.contains("failed")));
    }
}
