//! The oracle of the access analysis: what partitioned runs rely on, checked against what the
//! program really does. Each example is built with `--trace-accesses` (every buffer access of
//! every leaf instance is reported) and run on small grids; for every instance, the maps of
//! its analysis database, with the parameters fixed to that run's values, must give exactly
//! the elements the instance wrote (exact writes) and at least those it read.

mod common;

use common::{hpvm_mgpu, root, stderr, TempDir};
use dashdb::{Database, Node, ReadKind, WriteKind};
use isl_glue::{AccessMap, Isl};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One traced access.
struct Access {
    node: String,
    ids: [i64; 3],
    pids: [i64; 3],
    counts: [i64; 3],
    pcounts: [i64; 3],
    scalars: Vec<i64>,
    param: i64,
    offset: i64,
    bytes: i64,
    kind: String,
    /// The integer read (sign-extended), for an integer read.
    value: Option<i64>,
}

fn triple(s: &str) -> [i64; 3] {
    let v: Vec<i64> = s.split(',').map(|x| x.parse().unwrap()).collect();
    [v[0], v[1], v[2]]
}

fn parse_trace(text: &str) -> Vec<Access> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 11, "bad trace line {l}");
            Access {
                node: f[0].to_string(),
                ids: triple(f[1]),
                pids: triple(f[2]),
                counts: triple(f[3]),
                pcounts: triple(f[4]),
                scalars: if f[5].is_empty() { vec![] } else { f[5].split(',').map(|x| x.parse().unwrap()).collect() },
                param: f[6].parse().unwrap(),
                offset: f[7].parse().unwrap(),
                bytes: f[8].parse().unwrap(),
                kind: f[9].to_string(),
                value: f[10].parse().ok(),
            }
        })
        .collect()
}

/// One run of a node: its parameter values (by map name) and grid.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Run {
    params: Vec<(String, i64)>,
    /// Global extent per dimension.
    extent: Vec<i64>,
}

fn run_of(node: &Node, a: &Access) -> Run {
    let mut params: Vec<(String, i64)> = Vec::new();
    for (i, name) in node.param_names.iter().enumerate() {
        params.push((name.clone(), a.scalars.get(i).copied().unwrap_or(0)));
    }
    let grid = if node.block.is_some() { a.pcounts } else { a.counts };
    for (d, g) in ["gx", "gy", "gz"].iter().enumerate() {
        params.push((g.to_string(), grid[d]));
    }
    // A run-time block size is a parameter; the block's id and offset are the instance's own
    // (`block_params`).
    for r in node.block.iter().flat_map(|b| &b.runtime) {
        params.push((r.size.clone(), a.counts[r.dim as usize]));
    }
    if node.block.is_none() {
        for (d, (p, pn)) in [("px", "pnx"), ("py", "pny"), ("pz", "pnz")].iter().enumerate() {
            params.push((p.to_string(), a.pids[d]));
            params.push((pn.to_string(), a.pcounts[d]));
        }
    }
    // The threads of a block are the leaf's own instances: `counts` is the block size.
    let extent = (0..node.dims as usize)
        .map(|d| match &node.block {
            Some(_) => a.pcounts[d] * a.counts[d],
            None => a.counts[d],
        })
        .collect();
    Run { params, extent }
}

fn coords_of(node: &Node, a: &Access) -> Vec<i64> {
    (0..node.dims as usize)
        .map(|d| match &node.block {
            Some(_) => a.pids[d] * a.counts[d] + a.ids[d],
            None => a.ids[d],
        })
        .collect()
}

/// How far the oracle follows a grid-stride loop: its test programs' arrays are smaller.
const ORACLE_ITERATIONS: i64 = 1 << 12;

/// The coordinates whose maps give what the instance at `at` does: its own, and under a
/// grid-stride loop (`dashdb::RuntimeBlock::strided`) those of every iteration it runs,
/// `at + k × extent` in that dimension.
fn rounds_of(node: &Node, run: &Run, at: &[i64]) -> Vec<Vec<i64>> {
    let Some(d) = node.block.iter().flat_map(|b| &b.runtime).find(|r| r.strided).map(|r| r.dim as usize) else {
        return vec![at.to_vec()];
    };
    let step = run.extent[d].max(1);
    (0..)
        .map(|k| {
            let mut x = at.to_vec();
            x[d] += k * step;
            x
        })
        .take_while(|x| x[d] < ORACLE_ITERATIONS)
        .collect()
}

/// The parameters of a run plus, for a run-time block size, the id and offset of the block
/// holding the instance at `at`.
fn block_params(node: &Node, run: &Run, at: &[i64]) -> Vec<(String, i64)> {
    let mut params = run.params.clone();
    for r in node.block.iter().flat_map(|b| &b.runtime) {
        let size = run.params.iter().find(|(n, _)| n == &r.size).expect("block size").1;
        let id = at[r.dim as usize] / size;
        params.push((r.id.clone(), id));
        params.push((r.offset.clone(), id * size));
    }
    params
}

/// The value of a shape expression (`N`, `w`, `16`) under `params`.
fn eval(isl: &Isl, expr: &str, params: &[(&str, i64)]) -> i64 {
    let names: Vec<&str> = params.iter().map(|p| p.0).collect();
    let set = isl.set(&format!("[{}] -> {{ [s] : s = {expr} }}", names.join(", "))).unwrap();
    let set = set.fix_params(params).unwrap();
    let runs = set.runs(&[1]).unwrap();
    assert_eq!(runs.len(), 1, "shape `{expr}` has no single value");
    runs[0].start
}

/// The maps of one check, parsed and with their parameters fixed once per set of values:
/// most instances of a run share them, and parsing dominated the suite's time.
struct Maps<'i> {
    isl: &'i Isl,
    names: HashMap<String, Vec<String>>,
    fixed: HashMap<(String, Vec<(String, i64)>), AccessMap<'i>>,
}

impl<'i> Maps<'i> {
    fn new(isl: &'i Isl) -> Maps<'i> {
        Maps { isl, names: HashMap::new(), fixed: HashMap::new() }
    }

    /// `map` with the parameters it names fixed to their values in `params`.
    fn fixed(&mut self, map: &str, params: &[(String, i64)]) -> AccessMap<'i> {
        let isl = self.isl;
        let names = self.names.entry(map.to_string()).or_insert_with(|| isl.map(map).unwrap().params().unwrap());
        let fixed: Vec<(String, i64)> = params.iter().filter(|(n, _)| names.contains(n)).cloned().collect();
        let key = (map.to_string(), fixed);
        if let Some(m) = self.fixed.get(&key) {
            return m.copy().unwrap();
        }
        let values: Vec<(&str, i64)> = key.1.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let m = isl.map(map).unwrap().fix_params(&values).unwrap();
        let copy = m.copy().unwrap();
        self.fixed.insert(key, m);
        copy
    }
}

/// The elements (linear indices) `map` gives instance `at` under `params`.
fn elements(maps: &mut Maps<'_>, map: &str, params: &[(String, i64)], at: &[i64], shape: &[i64]) -> BTreeSet<i64> {
    let hi: Vec<i64> = at.iter().map(|x| x + 1).collect();
    let range = maps.fixed(map, params).restrict_to_box(at, &hi).unwrap().range().unwrap();
    range.runs(shape).unwrap().iter().flat_map(|r| r.start..r.end).collect()
}

/// The elements of `wanted` (linear indices) that `map` does not give instance `at`: a
/// membership test each, since a bound of data-dependent reads may span 2^31 elements.
fn left_out(
    maps: &mut Maps<'_>,
    map: &str,
    params: &[(String, i64)],
    at: &[i64],
    shape: &[i64],
    wanted: &BTreeSet<i64>,
) -> Vec<i64> {
    let hi: Vec<i64> = at.iter().map(|x| x + 1).collect();
    let range = maps.fixed(map, params).restrict_to_box(at, &hi).unwrap().range().unwrap();
    wanted
        .iter()
        .copied()
        .filter(|&e| {
            let mut point = vec![0; shape.len()];
            let mut rest = e;
            for d in (1..shape.len()).rev() {
                point[d] = rest.rem_euclid(shape[d]);
                rest = rest.div_euclid(shape[d]);
            }
            point[0] = rest;
            !range.contains(&point).unwrap()
        })
        .collect()
}

/// Everything the trace shows that the database does not allow, in words.
fn oracle(db: &Database, trace: &[Access]) -> Vec<String> {
    let isl = Isl::new();
    let mut maps = Maps::new(&isl);
    let mut problems = Vec::new();
    // node -> run -> instance -> param -> (reads, writes, integer values read by element).
    type PerArg = BTreeMap<i64, (BTreeSet<i64>, BTreeSet<i64>, BTreeMap<i64, i64>)>;
    let mut seen: BTreeMap<&str, BTreeMap<Run, BTreeMap<Vec<i64>, PerArg>>> = BTreeMap::new();
    for a in trace {
        let Some(node) = db.node(&a.node) else {
            problems.push(format!("node {} is not in the database", a.node));
            continue;
        };
        let per = seen.entry(&node.name).or_default().entry(run_of(node, a)).or_default();
        let arg = per.entry(coords_of(node, a)).or_default().entry(a.param).or_default();
        if a.param < 0 {
            problems.push(format!("{}: an access through a pointer not traced to a parameter", node.name));
            continue;
        }
        let Some(dbarg) = node.arg(a.param as u32) else {
            problems
                .push(format!("{}: access through parameter {} which the database does not list", node.name, a.param));
            continue;
        };
        if dbarg.read_map.is_none() && dbarg.write_map.is_none() && dbarg.write_through.is_none() {
            // Nothing claimed but "none", checked below by kind.
            if a.kind.contains('r') {
                arg.0.insert(a.offset);
            }
            if a.kind.contains('w') {
                arg.1.insert(a.offset);
            }
            continue;
        }
        let es = dbarg.element_size as i64;
        if a.offset % es != 0 || a.bytes != es {
            problems.push(format!(
                "{}: {} bytes at byte {} of `{}` is not one element",
                node.name, a.bytes, a.offset, dbarg.name
            ));
            continue;
        }
        if a.kind.contains('r') {
            arg.0.insert(a.offset / es);
            if let Some(v) = a.value {
                arg.2.insert(a.offset / es, v);
            }
        }
        if a.kind.contains('w') {
            arg.1.insert(a.offset / es);
        }
    }
    for (name, runs) in &seen {
        let node = db.node(name).unwrap();
        for (run, instances) in runs {
            let fixed: Vec<(&str, i64)> = run.params.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            if let Some(valid) = &node.valid_when {
                let v = isl.set(valid).unwrap();
                let names = v.params().unwrap();
                let f: Vec<(&str, i64)> = fixed.iter().filter(|(n, _)| names.iter().any(|m| m == n)).copied().collect();
                if v.fix_params(&f).unwrap().is_empty().unwrap() {
                    continue; // the maps do not claim anything for this run
                }
            }
            // Every instance of the grid, including those that accessed nothing.
            let mut all: Vec<Vec<i64>> = vec![vec![]];
            for &e in &run.extent {
                all = all.into_iter().flat_map(|p| (0..e).map(move |x| [p.clone(), vec![x]].concat())).collect();
            }
            for at in &all {
                let with_block = block_params(node, run, at);
                if let (Some(valid), Some(_)) = (&node.valid_when, &node.block) {
                    let v = isl.set(valid).unwrap();
                    let names = v.params().unwrap();
                    let f: Vec<(&str, i64)> = with_block
                        .iter()
                        .filter(|(n, _)| names.iter().any(|m| m == n))
                        .map(|(n, v)| (n.as_str(), *v))
                        .collect();
                    if v.fix_params(&f).unwrap().is_empty().unwrap() {
                        continue; // not claimed for this block
                    }
                }
                // Bounds on products of parameters: with this block's own ids and offsets, each
                // bound covers the instances of the block (the runtime takes the last block's).
                let value = |n: &str| with_block.iter().find(|(m, _)| m == n).map(|(_, v)| *v);
                if node.bounds.iter().any(|b| dashdb::Bound::parse(b).unwrap().holds(&value) != Some(true)) {
                    continue;
                }
                let empty = PerArg::new();
                let traced = instances.get(at).unwrap_or(&empty);
                for arg in &node.args {
                    let shape: Vec<i64> =
                        arg.shape.iter().map(|s| if s == "*" { 0 } else { eval(&isl, s, &fixed) }).collect();
                    let none = (BTreeSet::new(), BTreeSet::new(), BTreeMap::new());
                    let (reads, writes, _) = traced.get(&(arg.index as i64)).unwrap_or(&none);
                    let here = format!("{} instance {at:?} ({:?}), `{}`", node.name, run.params, arg.name);
                    let rounds = rounds_of(node, run, at);
                    let claimed_by = |maps: &mut Maps<'_>, map: &str, shape: &[i64]| -> BTreeSet<i64> {
                        let mut all = BTreeSet::new();
                        for x in &rounds {
                            all.extend(elements(maps, map, &block_params(node, run, x), x, shape));
                        }
                        all
                    };
                    match (arg.write, &arg.write_map) {
                        (WriteKind::Exact, Some(map)) => {
                            let claimed = claimed_by(&mut maps, map, &shape);
                            if &claimed != writes {
                                problems.push(format!("{here}: wrote {writes:?}, the write map says {claimed:?}"));
                            }
                        }
                        (WriteKind::May, Some(map)) => {
                            let claimed = claimed_by(&mut maps, map, &shape);
                            let missing: Vec<&i64> = writes.difference(&claimed).collect();
                            if !missing.is_empty() {
                                problems.push(format!("{here}: wrote {missing:?}, which the may-write map leaves out"));
                            }
                        }
                        (WriteKind::Indirect, _) => {
                            let t = arg.write_through.as_ref().expect("validated");
                            let from = node.arg(t.arg).expect("validated");
                            let from_shape: Vec<i64> =
                                from.shape.iter().map(|s| if s == "*" { 0 } else { eval(&isl, s, &fixed) }).collect();
                            let values = traced.get(&(t.arg as i64)).map(|x| &x.2);
                            let mut claimed = BTreeSet::new();
                            for e in elements(&mut maps, &t.map, &with_block, at, &from_shape) {
                                let Some(&v) = values.and_then(|m| m.get(&e)) else {
                                    problems.push(format!("{here}: did not read its index at `{}`[{e}]", from.name));
                                    continue;
                                };
                                let v = if t.signed || t.bits == 64 { v } else { v & ((1i64 << t.bits) - 1) };
                                let byte = (v + t.offset) * t.scale as i64;
                                claimed.insert(byte / arg.element_size as i64);
                            }
                            let ok = if t.every { &claimed == writes } else { writes.is_subset(&claimed) };
                            if !ok {
                                problems.push(format!("{here}: wrote {writes:?}, the indices read say {claimed:?}"));
                            }
                        }
                        (WriteKind::None, _) if !writes.is_empty() => {
                            problems.push(format!("{here}: wrote {writes:?} but the database says it writes nothing"))
                        }
                        _ => {}
                    }
                    match (arg.read, &arg.read_map) {
                        (ReadKind::None, _) if !reads.is_empty() => {
                            problems.push(format!("{here}: read {reads:?} but the database says it reads nothing"))
                        }
                        (ReadKind::None, _) | (_, None) => {}
                        // Where the read's own conditions fail, the whole array is read.
                        (_, Some(_))
                            if arg.read_valid_when.as_deref().is_some_and(|c| !holds(&isl, c, &with_block)) => {}
                        (_, Some(map)) => {
                            let mut missing: Vec<i64> = reads.iter().copied().collect();
                            for x in &rounds {
                                let wanted: BTreeSet<i64> = missing.iter().copied().collect();
                                missing = left_out(&mut maps, map, &block_params(node, run, x), x, &shape, &wanted);
                            }
                            if !missing.is_empty() {
                                problems.push(format!("{here}: read {missing:?}, which the read map leaves out"));
                            }
                        }
                    }
                }
            }
        }
    }
    problems
}

/// Whether the parameter set `cond` holds for the values `fixed` (those it names).
fn holds(isl: &Isl, cond: &str, fixed: &[(String, i64)]) -> bool {
    let v = isl.set(cond).unwrap();
    let names = v.params().unwrap();
    let f: Vec<(&str, i64)> =
        fixed.iter().filter(|(n, _)| names.iter().any(|m| m == n)).map(|(n, v)| (n.as_str(), *v)).collect();
    assert_eq!(f.len(), names.len(), "{cond}: not every parameter is known");
    !v.fix_params(&f).unwrap().is_empty().unwrap()
}

/// Builds `example` (a name in `examples/`, or a path) traced and analyses it: (their
/// directory, executable, database).
fn prepare(example: &str) -> (TempDir, PathBuf, Database) {
    let (src, example) = match example.rsplit_once('/') {
        Some((_, file)) => (example.to_string(), file.trim_end_matches(".c")),
        None => (format!("examples/{example}.c"), example),
    };
    let dir = TempDir::new(&format!("oracle-{example}"));
    let exe = dir.join(example);
    let o = hpvm_mgpu(&["build", &src, "--no-gpu", "--trace-accesses", "-o", exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dbfile = dir.join("db.json");
    let o = hpvm_mgpu(&["analyze", &src, "-o", dbfile.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = Database::load(&dbfile, Some(&std::fs::read(root().join(&src)).unwrap())).unwrap();
    (dir, exe, db)
}

/// Runs a traced executable with `args`; its trace.
fn trace(exe: &Path, args: &[&str]) -> Vec<Access> {
    let file = exe.with_extension(format!("trace-{}", args.join("-")));
    let o =
        Command::new(exe).args(args).env("HPVM_MGPU_TRACE", &file).env("HPVM_MGPU_DEVICES", "cpu").output().unwrap();
    assert!(o.status.success(), "{} {args:?}: {}", exe.display(), stderr(&o));
    let t = parse_trace(&std::fs::read_to_string(&file).unwrap());
    std::fs::remove_file(&file).unwrap();
    assert!(!t.is_empty());
    t
}

fn assert_exact(db: &Database, node: &str) {
    let n = db.node(node).unwrap_or_else(|| panic!("no node {node}"));
    assert!(n.partitionable, "{node}: {:?}", n.reasons);
    for a in &n.args {
        assert!(matches!(a.write, WriteKind::None | WriteKind::Exact), "{node} {}: {}", a.name, a.write);
        assert!(matches!(a.read, ReadKind::None | ReadKind::Exact), "{node} {}: {}", a.name, a.read);
    }
}

#[test]
fn maps_match_what_the_examples_do() {
    // (example, runs of small shapes, nodes whose maps must be exact)
    type Case<'a> = (&'a str, &'a [&'a [&'a str]], &'a [&'a str]);
    let cases: [Case; 6] = [
        ("vecadd", &[&["1"], &["37"], &["64"]], &["VecAdd"]),
        ("matmul", &[&["16"], &["32"]], &["MatMulThread"]),
        ("stencil2d", &[&["16", "16", "1"], &["32", "48", "2"]], &["StencilThread"]),
        ("nbody", &[&["7", "1"], &["33", "2"]], &["UpdateVelocity", "UpdatePosition"]),
        ("sgemm_tiled", &[&["16", "32", "16"], &["32", "16", "48"]], &["SgemmTile"]),
        ("pipeline", &[&["5", "3"], &["17", "9"]], &["LinearCombination"]),
    ];
    for (example, runs, exact) in cases {
        let (_dir, exe, db) = prepare(example);
        for node in exact {
            assert_exact(&db, node);
        }
        for args in runs {
            let problems = oracle(&db, &trace(&exe, args));
            assert!(problems.is_empty(), "{example} {args:?}:\n{}", problems[..problems.len().min(10)].join("\n"));
        }
    }
}

/// Programs written the common way rather than around the analysis (`tests/programs/`): block
/// sizes chosen at run time (and not dividing the grid), `int` indices, helpers.
#[test]
fn maps_match_programs_written_the_common_way() {
    type Case<'a> = (&'a str, &'a [&'a [&'a str]], &'a [&'a str]);
    let cases: [Case; 17] = [
        // `int` indices from `size_t` sizes over colour planes; writes one-to-one while the
        // grid has no more rows than a plane.
        ("tests/programs/planes.c", &[&["7", "6"], &["5", "9", "4"], &["1", "1"]], &["Mosaic", "Mix"]),
        // Loops whose exits depend on the data: an integer and a `float` condition, a `break`
        // (Find: its reads bounded by its row, a superset the oracle checks).
        ("tests/programs/escape.c", &[&["7", "5", "4"], &["3", "9", "5"], &["1", "1", "1"]], &["Collatz", "Grow"]),
        // `int` parameters scaling clamped neighbours, a run-time radius; `unsigned` flips.
        (
            "tests/programs/boxblur.c",
            &[&["11", "7", "4", "3", "2"], &["5", "9", "8", "2", "0"], &["1", "1", "1", "1", "1"]],
            &["Blur", "Mirror"],
        ),
        // Neighbours through pointers chosen by clamps; rows past the image.
        ("tests/programs/rowptr.c", &[&["7", "5"], &["1", "1"], &["3", "1"]], &["VSmooth", "HSmooth"]),
        // A blocks node bound out to the next node, blocks that do not divide.
        ("tests/programs/chain.c", &[&["37", "8", "1"], &["5", "7", "1"]], &["ScaleThread", "Smooth"]),
        // 32-bit unsigned indices: blocks that do not divide, a product with an `unsigned` k loop.
        (
            "tests/programs/unsigned.c",
            &[&["13", "9", "4", "3"], &["7", "11", "8", "2", "5"], &["1", "1", "1", "1"]],
            &["Diff", "Lap", "Mat", "RowSum"],
        ),
        ("tests/programs/blur.c", &[&["13", "9", "4", "3", "1"], &["7", "11", "8", "2", "1"]], &[]),
        ("tests/programs/rownorm.cc", &[&["9", "5"], &["7", "1"]], &[]),
        // Images narrower and shorter than the filter too: every clamp piece and their overlaps.
        ("tests/programs/conv.c", &[&["11", "7", "1"], &["3", "2", "1"], &["1", "5", "1"]], &[]),
        // Radii 0, wider than the image, and a block that does not divide the signal.
        ("tests/programs/radius.c", &[&["9", "7", "2", "4"], &["3", "2", "3", "5"], &["5", "4", "0", "3"]], &[]),
        (
            "tests/programs/heat3d.c",
            &[&["7", "6", "5", "3", "2", "2", "1"], &["5", "4", "6", "4", "3", "4", "1"]],
            &["Cell"],
        ),
        ("tests/programs/threshold.c", &[&["1"], &["77"]], &[]),
        // Parboil lbm's shape: padded rows, constant extents, every field in one array.
        ("tests/programs/lattice.c", &[&["1"]], &["Cell"]),
        ("tests/programs/jacobi1d.c", &[&["37", "8", "1"], &["64", "16", "2"], &["5", "7", "1"]], &["Sweep"]),
        ("tests/programs/gemm_nt.c", &[&["12", "8", "5", "4", "2"], &["6", "9", "3", "3", "3"]], &["Gemm"]),
        // One round: the trace does not tell launches apart, and the indices change per round.
        ("tests/programs/jds.c", &[&["37", "8", "1"], &["20", "7", "1"]], &[]),
        // A grid-stride loop: each instance runs several iterations, none, or one.
        ("tests/programs/gridstride.c", &[&["37", "4", "3"], &["5", "2", "4"], &["9", "16", "1"]], &["Saxpy"]),
    ];
    for (program, runs, exact) in cases {
        let (_dir, exe, db) = prepare(program);
        for node in exact {
            assert_exact(&db, node);
        }
        for args in runs {
            let problems = oracle(&db, &trace(&exe, args));
            assert!(problems.is_empty(), "{program} {args:?}:\n{}", problems[..problems.len().min(10)].join("\n"));
        }
    }
}

/// Shapes from a fixed-seed generator: sizes the examples were not written around.
#[test]
fn maps_match_on_generated_shapes() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |lo: u64, hi: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + seed % (hi - lo + 1)
    };
    let (_v, vecadd, vdb) = prepare("vecadd");
    let (_s, stencil, sdb) = prepare("stencil2d");
    let (_p, pipeline, pdb) = prepare("pipeline");
    for _ in 0..4 {
        let n = next(1, 300).to_string();
        assert_eq!(oracle(&vdb, &trace(&vecadd, &[&n])), Vec::<String>::new(), "vecadd {n}");
        let (w, h) = ((16 * next(1, 3)).to_string(), (16 * next(1, 3)).to_string());
        assert_eq!(oracle(&sdb, &trace(&stencil, &[&w, &h, "1"])), Vec::<String>::new(), "stencil2d {w} {h}");
        let (w, h) = (next(1, 24).to_string(), next(1, 24).to_string());
        assert_eq!(oracle(&pdb, &trace(&pipeline, &[&w, &h])), Vec::<String>::new(), "pipeline {w} {h}");
    }
}

/// The oracle is only worth something if it fails on a wrong map.
#[test]
fn oracle_catches_wrong_maps() {
    let (_dir, exe, db) = prepare("matmul");
    let t = trace(&exe, &["32"]);
    assert!(oracle(&db, &t).is_empty());
    let edit = |f: &dyn Fn(&mut dashdb::Arg)| {
        let mut bad = db.clone();
        let node = bad.nodes.iter_mut().find(|n| n.name == "MatMulThread").unwrap();
        node.args.iter_mut().for_each(f);
        bad
    };
    // The output transposed: every off-diagonal instance writes elsewhere.
    let transposed = edit(&|a| {
        if let Some(m) = &a.write_map {
            a.write_map = Some(m.replace("-> C[y, x]", "-> C[x, y]"));
        }
    });
    assert_ne!(transposed.nodes, db.nodes, "the edit must change the map");
    assert!(oracle(&transposed, &t).iter().any(|p| p.contains("the write map says")));
    // A read map missing the last column of A.
    let short = edit(&|a| {
        if a.name == "A" {
            a.read_map = a.read_map.as_ref().map(|m| m.replace("o1 < N", "o1 < N - 1"));
        }
    });
    assert_ne!(short.nodes, db.nodes, "the edit must change the map");
    assert!(oracle(&short, &t).iter().any(|p| p.contains("which the read map leaves out")));
}

/// The same for an indirect write: indices taken one element off.
#[test]
fn oracle_catches_wrong_indices() {
    let (_dir, exe, db) = prepare("tests/programs/jds.c");
    let t = trace(&exe, &["37", "8", "1"]);
    assert!(oracle(&db, &t).is_empty());
    let mut bad = db.clone();
    let node = bad.nodes.iter_mut().find(|n| n.name == "Spmv").unwrap();
    let y = node.args.iter_mut().find(|a| a.write_through.is_some()).expect("an indirect write");
    y.write_through.as_mut().unwrap().offset = 1;
    assert!(oracle(&bad, &t).iter().any(|p| p.contains("the indices read say")));
}

/// The oracle follows a grid-stride loop's iterations, and only because the database says the
/// maps are per iteration: read as one instance each, they miss every later iteration.
#[test]
fn oracle_follows_grid_stride_loops() {
    let (_dir, exe, db) = prepare("tests/programs/gridstride.c");
    let t = trace(&exe, &["37", "4", "3"]);
    assert_eq!(oracle(&db, &t), Vec::<String>::new());
    let mut flat = db.clone();
    for r in flat.nodes.iter_mut().flat_map(|n| n.block.iter_mut().flat_map(|b| b.runtime.iter_mut())) {
        r.strided = false;
    }
    assert!(oracle(&flat, &t).iter().any(|p| p.contains("wrote")), "{:?}", oracle(&flat, &t));
}
