//! One-GPU comparisons: per program, the time of our build and of NVIDIA's compilers' builds,
//! each relative to plain clang's (`bench/results/*-cuda-one-gpu.json`), or of our build's
//! configurations relative to nvcc's (a `launch_bound` table: the launch-bound programs).

use serde_json::Value;

/// One program's medians, in milliseconds, by configuration.
pub struct Row {
    pub program: String,
    /// (configuration, ms): `nvcc`, `clang`, `hpvm:1`, as measured.
    pub times: Vec<(String, f64)>,
}

impl Row {
    pub fn time(&self, config: &str) -> Option<f64> {
        self.times.iter().find(|(c, _)| c == config).map(|(_, t)| *t)
    }
}

/// The rows of the last batch of a one-GPU results file: its `median_kernel_ms` (programs
/// with arguments) and `polybench_xl_median_gpu_ms` (PolyBench-ACC at EXTRALARGE).
pub fn rows(v: &Value) -> Result<Vec<Row>, String> {
    let batch = v["batches"].as_array().and_then(|b| b.last()).ok_or("no `batches` in the results")?;
    let mut rows = Vec::new();
    if let Some(m) = batch["median_kernel_ms"].as_object() {
        for (program, configs) in m {
            let times = ["nvcc", "clang", "hpvm:1"]
                .iter()
                .filter_map(|c| configs[*c].as_f64().map(|t| (c.to_string(), t)))
                .collect();
            rows.push(Row { program: program.clone(), times });
        }
    }
    if let Some(m) = batch["polybench_xl_median_gpu_ms"].as_object() {
        for (program, configs) in m {
            let times = ["clang", "hpvm:1"]
                .iter()
                .filter_map(|c| configs[format!("{c}_ms")].as_f64().map(|t| (c.to_string(), t)))
                .collect();
            rows.push(Row { program: format!("PolyBench {program} (XL)"), times });
        }
    }
    rows.retain(|r| r.time("clang").is_some() && r.time("hpvm:1").is_some());
    if rows.is_empty() {
        return Err("no program has both a clang and an hpvm:1 time".into());
    }
    Ok(rows)
}

/// The rows of a results file's `launch_bound` table: `{program: {config: ms}}`, every
/// configuration measured beside `nvcc`'s build (medians, milliseconds).
pub fn launch_bound_rows(v: &Value) -> Result<Vec<Row>, String> {
    let table = v["launch_bound"].as_object().ok_or("no `launch_bound` table in the results")?;
    let rows: Vec<Row> = table
        .iter()
        .map(|(program, configs)| Row {
            program: program.clone(),
            times: configs
                .as_object()
                .map(|c| c.iter().filter_map(|(k, t)| t.as_f64().map(|t| (k.clone(), t))).collect())
                .unwrap_or_default(),
        })
        .filter(|r| r.time("nvcc").is_some() && r.times.len() > 1)
        .collect();
    if rows.is_empty() {
        return Err("no program of `launch_bound` has an nvcc time and another".into());
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_batch_and_skips_programs_without_a_baseline() {
        let v: Value = serde_json::from_str(
            r#"{"batches": [{"median_kernel_ms": {"old": {"clang": 1.0, "hpvm:1": 9.0}}},
                {"median_kernel_ms": {"stencil": {"nvcc": 97.0, "clang": 98.0, "hpvm:1": 98.5},
                                      "alone": {"hpvm:1": 3.0}},
                 "polybench_xl_median_gpu_ms": {"gemm": {"clang_ms": 8.5, "hpvm:1_ms": 2.9}}}]}"#,
        )
        .unwrap();
        let rows = rows(&v).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.program.as_str()).collect();
        assert_eq!(names, ["stencil", "PolyBench gemm (XL)"]);
        assert_eq!(rows[0].time("nvcc"), Some(97.0));
        assert_eq!(rows[1].time("nvcc"), None);
    }

    #[test]
    fn reads_the_launch_bound_table_against_nvcc() {
        let v: Value = serde_json::from_str(
            r#"{"launch_bound": {"lu": {"nvcc": 47.8, "hpvm:1": 54.3},
                                 "alone": {"hpvm:1": 3.0},
                                 "launches": {"nvcc": 14.4, "hpvm:1": 4.7, "hpvm:1 graphs off": 15.6}}}"#,
        )
        .unwrap();
        let rows = launch_bound_rows(&v).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.program.as_str()).collect();
        assert_eq!(names, ["launches", "lu"]);
        assert_eq!(rows[0].time("hpvm:1 graphs off"), Some(15.6));
        assert!(launch_bound_rows(&serde_json::json!({"launch_bound": {"x": {"hpvm:1": 1.0}}})).is_err());
    }
}
