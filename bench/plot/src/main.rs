//! `bench-plot`: draws the scaling figures from a results file of `scripts/device/scaling.sh`
//! (gathered under `bench/results/`), after the Mekong thesis's figures: speedup against
//! problem size per program, and the runtime breakdown of each configuration.
//!
//!     cargo run --release -p bench-plot -- bench/results/FILE.json -o bench/plots
//!
//! Writes `speedup.png` and `breakdown.png`. A one-GPU results file (its runs in `batches`,
//! `bench/results/*-cuda-one-gpu.json`) gives `one-gpu.png` instead: each program's time
//! against plain clang's build; one with a `launch_bound` table gives `launch-bound.png`: each
//! launch-bound program's time against nvcc's build. Text needs a TrueType font: DejaVu Sans
//! (Debian's `fonts-dejavu-core`) unless `--font PATH` names another.

mod baseline;
mod draw;
mod results;

use std::path::PathBuf;
use std::process::ExitCode;

const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-plot: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (mut input, mut out, mut font) = (None, PathBuf::from("bench/plots"), PathBuf::from(DEFAULT_FONT));
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" => out = args.next().ok_or("-o needs a folder")?.into(),
            "--font" => font = args.next().ok_or("--font needs a .ttf file")?.into(),
            "-h" | "--help" => {
                println!("usage: bench-plot RESULTS.json [-o FOLDER] [--font FILE.ttf]");
                return Ok(());
            }
            _ if input.is_none() => input = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument `{a}` (usage: bench-plot RESULTS.json [-o FOLDER])")),
        }
    }
    let input = input.ok_or("usage: bench-plot RESULTS.json [-o FOLDER] [--font FILE.ttf]")?;
    let text = std::fs::read_to_string(&input).map_err(|e| format!("{}: {e}", input.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", input.display()))?;
    let font_bytes = std::fs::read(&font)
        .map_err(|e| format!("the font {}: {e} (install fonts-dejavu-core or pass --font FILE.ttf)", font.display()))?;
    draw::register_font(font_bytes)?;
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    if value.get("launch_bound").is_some() {
        let rows = baseline::launch_bound_rows(&value).map_err(|e| format!("{}: {e}", input.display()))?;
        let path = out.join("launch-bound.png");
        let caption = value["launch_bound_caption"].as_str().or(value["device"].as_str()).unwrap_or("");
        draw::against_nvcc(&rows, caption, &path)?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    if value.get("batches").is_some() {
        let rows = baseline::rows(&value).map_err(|e| format!("{}: {e}", input.display()))?;
        let path = out.join("one-gpu.png");
        let caption = value["title"].as_str().or(value["device"].as_str()).unwrap_or("");
        draw::against_clang(&rows, caption, &path)?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let res: results::Results = serde_json::from_value(value).map_err(|e| format!("{}: {e}", input.display()))?;
    let points = results::points(&res.runs)?;
    if points.is_empty() {
        return Err(format!("{}: no runs", input.display()));
    }
    let caption = format!("{} (commit {})", res.title.as_deref().unwrap_or(&res.device), res.commit);
    let speedup = out.join("speedup.png");
    draw::speedup(&points, &caption, &speedup)?;
    let breakdown = out.join("breakdown.png");
    draw::breakdown(&points, &caption, &breakdown)?;
    println!("wrote {} and {}", speedup.display(), breakdown.display());
    Ok(())
}
