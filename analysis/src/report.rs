//! What `hpvm-mgpu analyze` prints: per node, in words a user understands, what it reads and
//! writes and whether (and along which dimension) it can be split across devices.

use dashdb::{Database, Node, ReadKind, WriteKind};
use std::fmt::Write;

const DIM: [&str; 3] = ["x", "y", "z"];

/// The whole report.
pub fn report(db: &Database) -> String {
    let mut s = String::new();
    for n in &db.nodes {
        node(&mut s, n);
    }
    s
}

/// One reason, after `lead`, with its `file:line` where known.
fn reason_line(s: &mut String, lead: &str, r: &dashdb::Reason) {
    let _ = match &r.location {
        Some(l) => writeln!(s, "{lead}{} ({l})", r.message),
        None => writeln!(s, "{lead}{}", r.message),
    };
}

fn node(s: &mut String, n: &Node) {
    let _ = write!(s, "node {} ({}): ", n.shown(), n.location);
    if n.partitionable {
        let dims: Vec<&str> = n.split.dims.iter().map(|&d| DIM[d as usize]).collect();
        let _ = match n.split.chosen_by {
            dashdb::SplitChoice::Analysis => writeln!(
                s,
                "partitionable, splittable along {} (best first: largest stride; each launch is cut along \
                 the first with enough blocks)",
                dims.join(", ")
            ),
            dashdb::SplitChoice::User => writeln!(s, "partitionable, split along {} (as asked)", dims.join(", ")),
        };
        if !n.merged_because.is_empty() {
            let _ = writeln!(
                s,
                "  its writes are merged (each device a whole copy, the bytes it changed taken after the launch; \
                 its blocks cannot talk within a launch), since:"
            );
            for r in &n.merged_because {
                reason_line(s, "    ", r);
            }
        }
    } else {
        let _ = writeln!(s, "not partitionable");
        for r in &n.reasons {
            reason_line(s, "  because ", r);
        }
        if n.specializable {
            let _ = writeln!(
                s,
                "  each launch's values (scalars, grid, block) may make these exact: the runtime analyses the node \
                 again with them built in, and splits where that proves its writes"
            );
        }
        if n.merge_fallback {
            let _ = writeln!(
                s,
                "  where they do not (or nothing analyses it again), its writes are merged (each device a whole \
                 copy, the bytes it changed taken after the launch; its blocks cannot talk within a launch)"
            );
        }
    }
    if let Some(b) = &n.block {
        let size: Vec<String> =
            b.size.iter().map(|e| if e.parse::<i64>().is_ok() { e.clone() } else { format!("`{e}`") }).collect();
        let _ = writeln!(s, "  instances: blocks of {} threads; I = block id × block + thread id", size.join(" × "));
        for r in &b.runtime {
            let _ = writeln!(
                s,
                "  block size in {} known at the launch: maps are per block, {} = {} × {} (the block's first instance)",
                ["x", "y", "z"][r.dim as usize],
                r.offset,
                r.id,
                r.size
            );
            if r.strided {
                let (c, g) = (["x", "y", "z"][r.dim as usize], ["gx", "gy", "gz"][r.dim as usize]);
                let _ = writeln!(
                    s,
                    "  a grid-stride loop in {c}: instance {c} runs the iterations {c} + k × {g} × {}, k >= 0, and \
                     the maps give one iteration's accesses, I[{c}] being its counter",
                    r.size
                );
            }
        }
    }
    for a in &n.args {
        let shape: String = a.shape.iter().map(|d| format!("[{d}]")).collect();
        let _ = writeln!(s, "  {} {}{shape}:", a.fundamental_type, a.name);
        match a.read {
            ReadKind::None => {}
            ReadKind::Exact => line(s, "reads exactly", a.read_map.as_deref()),
            ReadKind::OverApproximated => line(s, "reads at most", a.read_map.as_deref()),
            ReadKind::DataDependent => match &a.read_map {
                Some(m) => line(s, "reads, at data-dependent places, within", Some(m)),
                None => {
                    let _ = writeln!(s, "    reads {}[*] entirely (the analysis cannot bound its indices)", a.name);
                }
            },
        }
        if let Some(when) = &a.read_valid_when {
            let _ = writeln!(s, "    (that read map holds when {when}; otherwise {}[*] is read entirely)", a.name);
        }
        match a.write {
            WriteKind::None => {}
            WriteKind::Exact => line(s, "writes exactly", a.write_map.as_deref()),
            WriteKind::May => line(s, "may write", a.write_map.as_deref()),
            WriteKind::Indirect => {
                if let Some(t) = &a.write_through {
                    let from = n.arg(t.arg).map_or("?", |x| x.name.as_str());
                    let _ = writeln!(
                        s,
                        "    {} at indices read from `{from}` ({}{}-bit values{}), the runtime reading them at each launch: {}",
                        if t.every { "writes" } else { "may write" },
                        if t.signed { "signed " } else { "unsigned " },
                        t.bits,
                        match t.offset {
                            0 => String::new(),
                            o => format!(", plus {o}"),
                        },
                        t.map
                    );
                }
            }
            WriteKind::Reduce => {
                let r = a.reduction.map_or("?".to_string(), |r| r.to_string());
                match &a.write_map {
                    Some(m) => {
                        line(s, &format!("updates atomically ({r}; each device a private copy) within"), Some(m))
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            "    updates atomically ({r}; each device a private copy) anywhere in {}[*]",
                            a.name
                        );
                    }
                }
            }
            WriteKind::Merged => {
                let _ = writeln!(
                    s,
                    "    writes places the analysis cannot describe: split, each device writes a whole copy of {}[*] and the bytes it changed are merged",
                    a.name
                );
            }
            WriteKind::Unanalysable => {
                let _ = writeln!(s, "    writes places the analysis cannot describe");
            }
        }
        if a.read == ReadKind::None && a.write == WriteKind::None {
            let _ = writeln!(s, "    not accessed");
        }
    }
    for b in &n.bounds {
        let _ = writeln!(s, "  these maps assume {b} (the narrow index arithmetic does not overflow)");
    }
    if let Some(v) = &n.valid_when {
        let _ = writeln!(s, "  these maps assume {v}; otherwise the node runs on one device");
    }
}

fn line(s: &mut String, what: &str, map: Option<&str>) {
    let _ = writeln!(s, "    {what} {}", map.unwrap_or("?"));
}
