//! `hpvm-mgpu analyze`, `db show` and the database in `build`: snapshots of the report and
//! of the database for every example, the user's overrides, and refusals.

mod common;

use common::{cached_build, check_snapshot, examples, hpvm_mgpu, root, run_program, stderr, stdout, TempDir};

#[test]
fn reports_and_databases_of_the_examples() {
    let dir = TempDir::new("analyze-examples");
    for example in examples() {
        let stem = example.trim_end_matches(".c");
        let db = dir.join(&format!("{stem}.dashdb.json"));
        let o = hpvm_mgpu(&["analyze", &format!("examples/{example}"), "-o", db.to_str().unwrap()]);
        assert!(o.status.success(), "{example}: {}", stderr(&o));
        check_snapshot(&format!("analyze-{stem}.txt"), &stdout(&o));
        check_snapshot(&format!("{stem}.dashdb.json"), &std::fs::read_to_string(&db).unwrap());
        let o = hpvm_mgpu(&["db", "show", db.to_str().unwrap()]);
        assert!(o.status.success(), "{example}: {}", stderr(&o));
        // The path of the database file differs per run; the rest must not.
        check_snapshot(&format!("db-show-{stem}.txt"), &stdout(&o));
    }
}

/// Programs in the shapes users write (`tests/programs/`): the report of each, snapshotted.
#[test]
fn reports_of_programs_written_the_common_way() {
    for file in [
        "jacobi1d.c",
        "gemm_nt.c",
        "heat3d.c",
        "threshold.c",
        "blur.c",
        "conv.c",
        "jds.c",
        "rownorm.cc",
        "radius.c",
        "unsigned.c",
        "chain.c",
        "rowptr.c",
        "boxblur.c",
        "escape.c",
        "planes.c",
        "lattice.c",
    ] {
        let program = file.split('.').next().unwrap();
        let o = hpvm_mgpu(&["analyze", &format!("tests/programs/{file}")]);
        assert!(o.status.success(), "{program}: {}", stderr(&o));
        check_snapshot(&format!("analyze-program-{program}.txt"), &stdout(&o));
    }
}

/// A 32-bit `unsigned` index the analysis cannot widen (a difference, which wraps below zero)
/// is refused with that reason and its line, not as "not affine" in general.
#[test]
fn an_unsigned_difference_in_a_written_index_is_named() {
    let dir = TempDir::new("unsigned-difference");
    let src = dir.join("unsigned.c");
    let text = std::fs::read_to_string(root().join("tests/programs/unsigned.c")).unwrap();
    let line = 1 + text.lines().position(|l| l == "    c[row * n + col] = s;").expect("Mat's write");
    let text = text.replace("    c[row * n + col] = s;", "    c[row * n + col - 1] = s;");
    std::fs::write(&src, text).unwrap();
    std::fs::copy(root().join("tests/programs/check.h"), dir.join("check.h")).unwrap();
    let o = hpvm_mgpu(&["analyze", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("node Mat (") && out.contains("not partitionable"), "{out}");
    assert!(
        out.contains("32-bit `unsigned` arithmetic that may wrap around")
            && out.contains(&format!("unsigned.c:{line}")),
        "{out}"
    );
}

#[test]
fn data_dependent_writes_are_not_partitionable() {
    let o = hpvm_mgpu(&["analyze", "examples/histogram.c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // Atomic increments at data-dependent bins: a reduction, split over private copies.
    assert!(out.contains("node Histogram (examples/histogram.c:30): partitionable"), "{out}");
    assert!(out.contains("updates atomically (add on i32; each device a private copy) anywhere in bins[*]"), "{out}");
    // A scatter through indices the node only reads: split by an inspector at run time.
    assert!(out.contains("node Scatter (examples/histogram.c:42): partitionable"), "{out}");
    assert!(out.contains("writes at indices read from `perm`"), "{out}");
    // The same shape through an index the node also writes has no inspector: its writes are
    // merged (its blocks cannot talk), and the report says why, with the line.
    let dir = TempDir::new("scatter");
    let src = dir.join("self.c");
    let text = std::fs::read_to_string(root().join("examples/histogram.c")).unwrap();
    let text = text.replace("out[perm[i]] = in[i];", "out[perm[i]] = in[i];\n    perm[i] = 0;");
    std::fs::write(
        &src,
        text.replace("__hpvm__attributes(2, in, perm, 1, out);", "__hpvm__attributes(2, in, perm, 2, out, perm);"),
    )
    .unwrap();
    let o = hpvm_mgpu(&["analyze", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let at = out.find("node Scatter").expect("the node");
    let scatter = &out[at..];
    assert!(scatter.contains("partitionable") && scatter.contains("its writes are merged"), "{out}");
    assert!(
        scatter.contains("indices read from `perm`, which the node also writes") && scatter.contains("self.c:50"),
        "{out}"
    );
}

/// A grid-stride loop (`i += blocks × block`, a product of two run-time values) is read one
/// iteration at a time: the node splits, and the report says how its maps are to be read.
#[test]
fn grid_stride_loops_split_by_iterations() {
    let o = hpvm_mgpu(&["analyze", "tests/programs/gridstride.c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("node Saxpy (tests/programs/gridstride.c:19): partitionable"), "{out}");
    assert!(out.contains("a grid-stride loop in x"), "{out}");
    assert!(
        out.contains("writes exactly [boffx, n, bsx] -> { I[x] -> y_[x] : boffx <= x < n and x < boffx + bsx }"),
        "{out}"
    );
}

/// Grid-stride loops that may not be read per iteration say why, with the line; a write the
/// analysis cannot bound is not called partitionable by maps: those of blocks that cannot
/// talk are merged, and the report says why.
#[test]
fn grid_stride_loops_that_do_not_split_say_why() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/stride.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for (node, why) in [
        (
            "marked (tests/cuda/stride.cu:55)",
            "the loop is entered under another condition on the thread's position (tests/cuda/stride.cu:57)",
        ),
        (
            "until_negative (tests/cuda/stride.cu:61)",
            "may be left before its test (a `break` or `return` inside) (tests/cuda/stride.cu:62)",
        ),
    ] {
        let at = out.find(&format!("node {node}: partitionable")).unwrap_or_else(|| panic!("{node}: {out}"));
        let end = out[at + 1..].find("\nnode ").map_or(out.len(), |e| at + 1 + e);
        assert!(out[at..end].contains("its writes are merged"), "{node}: {}", &out[at..end]);
        assert!(out[at..end].contains(why), "{node}: {}", &out[at..end]);
    }
    // `total`'s loop stays whole (its atomic is outside it), but the atomic is a reduction:
    // the launch splits by its own blocks, each reading all of `v`.
    for node in ["axpy", "scale_wide", "smooth", "rows", "carry", "either", "fill_const", "total"] {
        let at = out.find(&format!("node {node} (tests/cuda/stride.cu:")).unwrap_or_else(|| panic!("{node}: {out}"));
        let head = out[at..].lines().next().unwrap();
        assert!(head.contains("): partitionable, splittable along"), "{head}");
    }
}

/// A tiled stencil whose halo is loaded one thread per side: Polly dismissed it for the
/// complexity of its thread tests until the analysis made each such test hold for every
/// thread with the thread's index replaced (`analysis/src/loosen.rs`). The block then reads
/// exactly what it did: its reads are exact, the halo columns and rows included.
#[test]
fn halo_loads_by_one_thread_per_side_are_analysed_exactly() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/tiled.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let at = out.find("node jacobi (tests/cuda/tiled.cu:22)").unwrap_or_else(|| panic!("{out}"));
    let end = out[at + 1..].find("\nnode ").map_or(out.len(), |e| at + 1 + e);
    let text = &out[at..end];
    assert!(text.lines().next().unwrap().contains("): partitionable, splittable along y"), "{text}");
    assert!(text.contains("reads exactly"), "{text}");
    // The right halo (thread 15's x + 1) and the bottom one (thread row 7's y + 1).
    assert!(text.contains("-> in[-boffy + 8bidy + y, 16 + 16bidx]"), "{text}");
    assert!(text.contains("-> in[8 + 8bidy, -boffx + 16bidx + x]"), "{text}");
    assert!(text.contains("writes exactly"), "{text}");
}

/// Warp operations and inline PTX that moves no memory are no accesses: a kernel reducing
/// through CUB's BlockReduce, whose shuffles are inline PTX, is analysed (it ran whole: "a call
/// the analysis cannot see into"). `tile_max` stays whole for another reason, its result's
/// index `blockIdx.y * gridDim.x + blockIdx.x`, a product of two launch values.
#[test]
fn register_only_warp_and_ptx_operations_are_no_accesses() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/blockreduce.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("node row_sums (tests/cuda/blockreduce.cu:22): partitionable, splittable along"), "{out}");
    assert!(!out.contains("a call the analysis cannot see into"), "{out}");
}

/// A compare-and-swap writes what the value it finds decides: a kernel with one that is no
/// update the devices can combine (a float minimum through `fminf`) stays whole, its writes
/// never merged across devices (they were, and each device's updates of an element lost the
/// others': HeCBench scatter failed its own check on four devices). A loop that retries an
/// add, an integer `max` or `min`, or a double add through the value's bits until it swaps is
/// that atomic update, a reduction: its kernel splits on four devices with the host's
/// results.
#[test]
fn compare_and_swap_loops_are_reductions_or_keep_their_node_whole() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/cas_loops.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let scatter = &out[out.find("node scatter").unwrap()..];
    assert!(scatter.starts_with("node scatter (tests/cuda/cas_loops.cu:95): not partitionable"), "{out}");
    assert!(scatter.contains("a compare-and-swap writes what the value it finds decides"), "{out}");
    assert!(!out.contains("merged"), "{out}");
    let combining = &out[out.find("node combining").unwrap()..out.find("node scatter").unwrap()];
    assert!(combining.contains("partitionable, splittable along x"), "{out}");
    for r in ["add on i64", "add on f64", "max on i32", "min on u32"] {
        assert!(combining.contains(&format!("updates atomically ({r}; each device a private copy)")), "{r}: {out}");
    }

    let exe = cached_build("tests/cuda/cas_loops.cu", &["-O2"]);
    let dir = TempDir::new("cas_loops");
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["1000", "7"],
        &[("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let node = |name: &str| stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).expect(name).clone();
    assert_eq!(node("combining.blocks")["partitioned_launches"], 2, "{stats}");
    assert_eq!(node("scatter.blocks")["partitioned_launches"], 0, "{stats}");
}

/// Clock reads address nothing: kernels that spin on `clock64()` or `clock()` (NVIDIA's
/// simpleHyperQ) before writing their own elements split (they ran whole: "a call the
/// analysis cannot see into"), and an index computed from the clock is named as
/// data-dependent, not taken for a product of run-time values. Every launch splits on three
/// devices, with the host's results.
#[test]
fn clock_reads_are_no_accesses() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/clocked.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for node in [
        "after_wait (tests/cuda/clocked.cu:26)",
        "wrapped_wait (tests/cuda/clocked.cu:36)",
        "counted (tests/cuda/clocked.cu:45)",
    ] {
        assert!(out.contains(&format!("node {node}: partitionable, splittable along x")), "{out}");
    }
    assert!(!out.contains("a call the analysis cannot see into"), "{out}");
    assert!(out.contains("`out` is written at a data-dependent index (tests/cuda/clocked.cu:64)"), "{out}");

    let exe = cached_build("tests/cuda/clocked.cu", &["-O2"]);
    let dir = TempDir::new("clocked");
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["1000", "100"],
        &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for node in ["after_wait.blocks", "wrapped_wait.blocks", "counted.blocks"] {
        let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect(node);
        assert_eq!(n["partitioned_launches"], 1, "{node}: {n}");
    }
}

/// Rows as long as the grid has threads (`rf[q * blockDim.x * gridDim.x + tid]`, HeCBench
/// s3d): the product of two launch values is a map parameter of its own, which the database
/// records with its factors and the runtime computes, so the writes are exact and the kernels
/// split; a scalar row offset (`(off + 1) * blockDim.x * gridDim.x`) adds a second product.
#[test]
fn rows_as_long_as_the_grid_split() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/soa_rows.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for node in ["rates (tests/cuda/soa_rows.cu:32)", "combine (tests/cuda/soa_rows.cu:42)"] {
        assert!(out.contains(&format!("node {node}: partitionable")), "{out}");
    }
    assert!(out.contains("c[prod_bsx_gx + prod_bsx_gx_off + x]"), "{out}");
    assert!(!out.contains("p_"), "{out}");

    let dir = TempDir::new("soa_rows");
    let db = dir.path_str("soa.dashdb.json");
    let o = hpvm_mgpu(&["analyze", "tests/cuda/soa_rows.cu", "-o", &db]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&db).unwrap()).unwrap();
    let combine = json["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "_Z7combinePKiPii").expect("combine");
    let products: Vec<String> = combine["products"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}={}", p["name"].as_str().unwrap(), p["factors"].as_array().unwrap().len()))
        .collect();
    assert_eq!(products, ["prod_bsx_gx=2", "prod_bsx_gx_off=3"], "{combine}");

    let exe = cached_build("tests/cuda/soa_rows.cu", &["-O2"]);
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["13", "2"],
        &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for node in ["rates.blocks", "combine.blocks"] {
        let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect(node);
        assert_eq!(n["partitioned_launches"], 3, "{node}: {n}");
    }
}

/// Math intrinsics that stay libdevice calls (`__expf`, `__fdividef`, `isinf`) touch no
/// memory, a local table initialised from a constant is no call, and a loop that writes its
/// row each step until it converges (a data-dependent `break`, with the cleanup `switch`
/// clang makes at -O2) writes at most what running to its affine exit writes: the three kernels of math.cu split, the row writes as may-writes. At -O0
/// (`analyze`) and through a build at -O2 (the statistics of a run on four devices).
#[test]
fn math_calls_and_converging_loops_split() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/math.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for node in [
        "fast (tests/cuda/math.cu:23)",
        "poly (tests/cuda/math.cu:34)",
        "rows (tests/cuda/math.cu:46)",
        "lj (tests/cuda/math.cu:63)",
    ] {
        assert!(out.contains(&format!("node {node}: partitionable, splittable along x")), "{out}");
    }
    assert!(!out.contains("a call the analysis cannot see into"), "{out}");
    let rows = &out[out.find("node rows").unwrap()..];
    assert!(rows.contains("may write") && rows.contains("-> p[x, o1]") && rows.contains("0 <= o1 < k"), "{out}");

    let exe = cached_build("tests/cuda/math.cu", &["-O2"]);
    let dir = TempDir::new("math");
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["1001", "6"],
        &[("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for node in ["fast.blocks", "poly.blocks", "rows.blocks", "lj.blocks"] {
        let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect(node);
        assert_eq!(n["partitioned_launches"], 1, "{node}: {n}");
    }
}

/// A scatter written as Thrust writes it (`out[map[base + i]]` with `base = blockIdx.x *
/// per_thread * 256`, a `min` through branches, a full and a partial tile): the place of the
/// indices multiplies run-time values, so the build's maps say the runtime analyses the node
/// again; with the launch's values the indices' places are affine and the runtime reads them
/// (an inspector). Every launch splits on four devices.
#[test]
fn scatters_through_tiles_of_a_runtime_size_split() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/scatter.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let at = out.find("node scatter_tiles").expect("the node");
    let scatter = &out[at..out[at..].find("\nnode ").map_or(out.len(), |e| at + e)];
    assert!(scatter.contains("at a place that is not affine (it multiplies run-time values)"), "{out}");
    assert!(scatter.contains("the runtime analyses the node again"), "{out}");
    assert!(!scatter.contains("data-dependent index"), "{out}");

    let exe = cached_build("tests/cuda/scatter.cu", &["-O2"]);
    let dir = TempDir::new("scatter");
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["10007", "3", "2"],
        &[("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for (node, launches) in [("scatter_tiles.blocks", 2), ("gather.blocks", 1)] {
        let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect(node);
        assert_eq!(n["partitioned_launches"], launches, "{node}: {n}");
    }
}

/// Writes no analysis can place (through two levels of indices, at an index computed from a
/// loaded float) by blocks that cannot talk within a launch are merged: each device runs its
/// blocks on a whole copy and the bytes it changed are taken into the home's. A kernel whose
/// blocks publish through a fence and a volatile flag stays whole and says why, at its line.
/// On four devices every launch of the merged kernels splits, and the program passes; so does
/// a flag any thread may set, whose parts' writes overlap, and a write at `i ^ mask`, which the
/// launch's values leave beyond affine arithmetic (merged by them, or by the build's fallback),
/// and a merge path's search whose maps hold for no launch (every read whole, every write
/// merged).
#[test]
fn writes_no_analysis_can_place_are_merged_where_blocks_cannot_talk() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/merged.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let node = |name: &str| {
        let at = out.find(&format!("node {name} (tests/cuda/merged.cu:")).unwrap_or_else(|| panic!("{name}: {out}"));
        let end = out[at + 1..].find("\nnode ").map_or(out.len(), |e| at + 1 + e);
        out[at..end].to_string()
    };
    for name in ["place", "by_key"] {
        let n = node(name);
        assert!(n.contains("partitionable, splittable"), "{n}");
        assert!(n.contains("the bytes it changed are merged"), "{n}");
    }
    // `i ^ mask` stays beyond affine arithmetic whatever the values: merged where they fail.
    let swizzle = node("swizzle");
    assert!(swizzle.contains("not partitionable") && swizzle.contains("its writes are merged"), "{swizzle}");
    // Maps that hold for no launch: none used, every read whole and every write merged.
    let cuts = node("cuts");
    assert!(cuts.contains("no launch can check") && cuts.contains("its writes are merged"), "{cuts}");
    let publish = node("publish");
    assert!(publish.contains("not partitionable"), "{publish}");
    assert!(publish.contains("its blocks may talk through memory within a launch"), "{publish}");
    assert!(publish.contains("(tests/cuda/merged.cu:87)"), "{publish}");

    let exe = cached_build("tests/cuda/merged.cu", &["-O2"]);
    let dir = TempDir::new("merged");
    let file = dir.path_str("stats.json");
    let run = run_program(
        &exe,
        &["20011", "3"],
        &[("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // `any_above`'s flag: a may-write every part's map reaches, merged at the launch.
    let splits = [
        ("place.blocks", 3),
        ("by_key.blocks", 3),
        ("swizzle.blocks", 3),
        ("any_above.blocks", 2),
        ("cuts.blocks", 1),
        ("publish.blocks", 0),
    ];
    for (node, split) in splits {
        let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect(node);
        assert_eq!(n["partitioned_launches"], split, "{node}: {n}");
    }
    // With no analysis at run time, the fallback merges `swizzle` alike.
    let run = run_program(
        &exe,
        &["20011", "3"],
        &[
            ("HPVM_MGPU_DEVICES", "cpu:4"),
            ("HPVM_MGPU_PARTITION", "always"),
            ("HPVM_MGPU_SPECIALIZE", "off"),
            ("HPVM_MGPU_STATS", &file),
        ],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let n = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "swizzle.blocks").unwrap();
    assert_eq!(n["partitioned_launches"], 3, "{n}");
    // Merged in pieces of a few bytes (each piece's merge before the next piece's copy): the
    // same output.
    let run = run_program(
        &exe,
        &["20011", "3"],
        &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_MERGE_PIECE", "4097")],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    // Off, they run whole.
    let run = run_program(
        &exe,
        &["1000", "1"],
        &[
            ("HPVM_MGPU_DEVICES", "cpu:4"),
            ("HPVM_MGPU_PARTITION", "always"),
            ("HPVM_MGPU_MERGE", "off"),
            ("HPVM_MGPU_STATS", &file),
        ],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let place = stats["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "place.blocks").unwrap();
    assert_eq!(place["partitioned_launches"], 0, "{place}");
}

/// A `float2` or struct copied between a buffer and a thread's local array is a fixed-size
/// `memcpy`, which Polly does not model: it is read as the loads and stores it is, and the
/// FFT-shaped kernel's maps are exact.
#[test]
fn small_copies_between_buffers_and_local_arrays_are_accesses() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/local_copies.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("a call the analysis cannot see into"), "{out}");
    let at = out.find("node rotate8 (tests/cuda/local_copies.cu:22): partitionable").expect(&out);
    let end = out[at + 1..].find("\nnode ").map_or(out.len(), |e| at + 1 + e);
    assert!(out[at..end].contains("reads exactly") && out[at..end].contains("writes exactly"), "{}", &out[at..end]);
}

/// The fields of a struct passed by value are not named as Polly names the parameters it
/// makes (`p_<n>`): `blockIdx.y * p.width` was taken for the field `p_7`, and a write map
/// called exact put every partition's writes in row 0 (a wrong result on several devices).
#[test]
fn struct_fields_are_not_taken_for_pollys_parameters() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/struct_fields.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("writes exactly"), "{out}");
    assert!(out.contains("p_0_"), "{out}");
    assert!(!out.contains(" p_7]") && !out.contains(" p_7,"), "{out}");
}

/// Atomic updates that combine (add, min, max, and, or, xor on 32- and 64-bit integers, float
/// sums) are reductions; atomics whose old value is used, or on an argument also read
/// plainly, keep the node whole and say why at the user's line.
#[test]
fn atomics_that_combine_are_reductions_and_the_others_say_why() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/reduce.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let node = |name: &str| {
        let at = out.find(&format!("node {name} (tests/cuda/reduce.cu:")).unwrap_or_else(|| panic!("{name}: {out}"));
        let end = out[at + 1..].find("\nnode ").map_or(out.len(), |e| at + 1 + e);
        out[at..end].to_string()
    };
    for (name, updates) in [
        ("histogram", vec!["(add on i32; each device a private copy) anywhere in bins[*]"]),
        ("sum", vec!["(add on f32; each device a private copy) within", "-> total[0]"]),
        ("extremes", vec!["(min on i32;", "(max on i32;", "(min on u32;", "(max on u32;"]),
        ("wide", vec!["(add on i64;", "(max on i64;", "(add on f64;"]),
        ("bits", vec!["(or on u32;", "(and on u32;", "(xor on u32;"]),
        ("take", vec!["(add on i32;"]),
    ] {
        let text = node(name);
        assert!(text.lines().next().unwrap().contains("): partitionable, splittable along"), "{text}");
        for u in updates {
            assert!(text.contains(&format!("updates atomically {u}")) || text.contains(u), "{name}: {u}: {text}");
        }
    }
    let compact = node("compact");
    assert!(compact.contains(": not partitionable"), "{compact}");
    assert!(
        compact.contains(
            "`slots` is updated atomically and its old value is used: the updates of different devices could not be \
             combined (tests/cuda/reduce.cu:85)"
        ),
        "{compact}"
    );
    let capped = node("capped");
    assert!(
        capped.contains("`count` is updated atomically and also read or written plainly")
            && capped.contains("reduce.cu:91"),
        "{capped}"
    );
}

#[test]
fn the_user_chooses_the_split() {
    let o = hpvm_mgpu(&["analyze", "examples/matmul.c", "--split", "MatMulThread=x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("partitionable, split along x (as asked)"), "{}", stdout(&o));
    for (bad, says) in [
        ("MatMulThread=z", "there is no dimension 2"),
        ("Nope=x", "there is no leaf node `Nope`"),
        ("MatMulThread=w", "expected NODE=DIMS"),
    ] {
        let o = hpvm_mgpu(&["analyze", "examples/matmul.c", "--split", bad]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        assert!(stderr(&o).contains(says), "{bad}: {}", stderr(&o));
    }
}

#[test]
fn db_show_one_node_and_unknown_nodes() {
    let dir = TempDir::new("analyze-show");
    let db = dir.join("m.json");
    assert!(hpvm_mgpu(&["analyze", "examples/nbody.c", "-o", db.to_str().unwrap()]).status.success());
    let o = hpvm_mgpu(&["db", "show", db.to_str().unwrap(), "--node", "UpdatePosition"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("node UpdatePosition") && !stdout(&o).contains("node UpdateVelocity"));
    let o = hpvm_mgpu(&["db", "show", db.to_str().unwrap(), "--node", "Nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no node `Nope`"), "{}", stderr(&o));
}

#[test]
fn build_uses_a_database_only_for_its_source() {
    let dir = TempDir::new("analyze-build-db");
    let db = dir.join("vecadd.dashdb.json");
    let exe = dir.join("vecadd");
    assert!(hpvm_mgpu(&["analyze", "examples/vecadd.c", "-o", db.to_str().unwrap()]).status.success());
    let o = hpvm_mgpu(&[
        "build",
        "examples/vecadd.c",
        "--no-gpu",
        "--db",
        db.to_str().unwrap(),
        "-o",
        exe.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The embedded database is the runtime's: its verdict shows in the statistics.
    let run = std::process::Command::new(&exe).arg("100").env("HPVM_MGPU_STATS", "1").output().unwrap();
    assert!(run.status.success());
    assert!(stderr(&run).contains("analysis: partitionable along x"), "{}", stderr(&run));
    // Another source: refused, and nothing is written.
    let other = dir.join("other");
    let o = hpvm_mgpu(&[
        "build",
        "examples/matmul.c",
        "--no-gpu",
        "--db",
        db.to_str().unwrap(),
        "-o",
        other.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("vecadd.c"), "{}", stderr(&o));
    assert!(!other.exists());
    // Another schema version: refused with a message about versions.
    let text = std::fs::read_to_string(&db)
        .unwrap()
        .replace(&format!("\"schema_version\": {}", dashdb::SCHEMA_VERSION), "\"schema_version\": 99");
    std::fs::write(&db, text).unwrap();
    let o = hpvm_mgpu(&[
        "build",
        "examples/vecadd.c",
        "--no-gpu",
        "--db",
        db.to_str().unwrap(),
        "-o",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("version"), "{}", stderr(&o));
}

/// C++ node functions are mangled symbols; reports name them as the user wrote them.
#[test]
fn cxx_node_names_are_demangled() {
    for cmd in ["analyze", "inspect"] {
        let o = hpvm_mgpu(&[cmd, "tests/inputs/scale.cpp"]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(out.contains("node kernels::Scale ("), "{cmd}:\n{out}");
        assert!(!out.contains("_Z"), "{cmd} shows a mangled name:\n{out}");
    }
    // The split is asked for by the name the report shows.
    let o = hpvm_mgpu(&["analyze", "tests/inputs/scale.cpp", "--split", "kernels::Scale=x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("split along x (as asked)"), "{}", stdout(&o));
}

/// Both ways of a data-dependent `if` write the same elements (lattice.c's bounce-back and
/// relaxation): one exact write. Ways that write different elements stay may-writes.
#[test]
fn writes_on_both_ways_of_a_branch_are_exact() {
    let o = hpvm_mgpu(&["analyze", "tests/programs/lattice.c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("partitionable") && out.contains("writes exactly"), "{out}");
    let dir = TempDir::new("twin-stores");
    let src = dir.join("lattice.c");
    let text = std::fs::read_to_string(root().join("tests/programs/lattice.c")).unwrap();
    let bounce = "    dst[AT(x, y, z, 6)] = f[5];";
    assert!(text.contains(bounce));
    std::fs::write(&src, text.replace(bounce, "    dst[AT(x, y, z + 1, 6)] = f[5];")).unwrap();
    std::fs::copy(root().join("tests/programs/check.h"), dir.join("check.h")).unwrap();
    let o = hpvm_mgpu(&["analyze", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("may write"), "{out}");
}

/// Indices that multiply or divide by run-time values (`i % width`, `j * cols`, `blockIdx.y *
/// gridDim.x`) keep the build's maps inexact; the report says the runtime makes them again
/// with each launch's values (`tests/partitioned.rs` runs them split).
#[test]
fn kernels_that_want_their_launchs_values_are_marked_so() {
    let o = hpvm_mgpu(&["analyze", "tests/cuda/values.cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for k in ["periodic", "layers", "flat"] {
        let at = out.find(&format!("node {k} ")).unwrap_or_else(|| panic!("no node {k}: {out}"));
        let section = &out[at..];
        let end = section[1..].find("\nnode ").map_or(section.len(), |e| e + 1);
        assert!(section[..end].contains("the runtime analyses the node again"), "{k}: {}", &section[..end]);
    }
    // A kernel not partitionable whatever the values (a data-dependent index) is not marked.
    let o = hpvm_mgpu(&["analyze", "examples/histogram.c"]);
    assert!(!stdout(&o).contains("analyses the node again"), "{}", stdout(&o));
}

/// `hpvm-mgpu specialize` (the runtime's) refuses what is not an analysis input, and values
/// that are not NAME=INTEGER, with a message and exit 1.
#[test]
fn specialize_refuses_bad_input_plainly() {
    use std::io::Write;
    let run = |args: &[&str], input: &[u8]| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
            .arg("specialize")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the compiler runs");
        let _ = child.stdin.take().expect("stdin").write_all(input);
        child.wait_with_output().expect("it ends")
    };
    let o = run(&["kernel", "n=3"], b"not bitcode");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("standard input is not an analysis input"), "{}", stderr(&o));
    let o = run(&["kernel", "n=three"], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`n=three`: the value is no integer"), "{}", stderr(&o));
    let o = run(&["kernel", "n"], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("expected NAME=VALUE"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}
