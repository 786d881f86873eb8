//! `hpvm-mgpu inspect` on the examples and on inputs in every accepted form.

mod common;
use common::*;

const EXAMPLES: [&str; 6] = ["matmul.c", "nbody.c", "pipeline.c", "sgemm_tiled.c", "stencil2d.c", "vecadd.c"];

#[test]
fn every_example_is_there() {
    let found = examples();
    for e in EXAMPLES {
        assert!(found.iter().any(|f| f == e), "examples/{e} is missing");
    }
}

#[test]
fn inspect_text_of_every_example_matches_snapshot() {
    for e in examples() {
        let out = hpvm_mgpu(&["inspect", &format!("examples/{e}")]);
        assert!(out.status.success(), "inspect examples/{e} failed:\n{}", stderr(&out));
        check_snapshot(&format!("{e}.inspect.txt"), &stdout(&out));
    }
}

#[test]
fn inspect_dot_of_every_example_matches_snapshot() {
    for e in examples() {
        let out = hpvm_mgpu(&["inspect", "--dot", &format!("examples/{e}")]);
        assert!(out.status.success(), "inspect --dot examples/{e} failed:\n{}", stderr(&out));
        let dot = stdout(&out);
        assert!(dot.starts_with("digraph hpvm {") && dot.trim_end().ends_with('}'));
        check_snapshot(&format!("{e}.inspect.dot"), &dot);
    }
}

#[test]
fn structure_of_the_examples() {
    let text = |e: &str| stdout(&hpvm_mgpu(&["inspect", &format!("examples/{e}")]));
    // matmul: root -> 2-D blocks -> 2-D threads of 16 x 16
    let m = text("matmul.c");
    assert!(m.contains("node MatMulBlocks (internal, hint GPU, 2-D [N / 16, N / 16])"), "{m}");
    assert!(m.contains("node MatMulThread (leaf, hint GPU, 2-D [16, 16])"), "{m}");
    // sgemm: an allocation node feeding the tile leaf over all-to-all edges, and barriers
    let s = text("sgemm_tiled.c");
    assert!(s.contains("(allocation, hint GPU, 0-D)"), "{s}");
    assert!(s.contains("(all-to-all)"), "{s}");
    assert!(s.contains("barrier x2"), "{s}");
    // pipeline: at least three children joined by edges
    let p = text("pipeline.c");
    assert!(p.matches("  edge:").count() >= 2, "{p}");
    // nbody: velocities then positions, ordered by an edge
    let n = text("nbody.c");
    assert!(n.contains("edge:     UpdateVelocity.out0 -> UpdatePosition."), "{n}");
}

#[test]
fn cpp_source_with_driver_flags() {
    // -x c++ on a .c-less name, -I for a user header, -D for a macro, -std=
    let out = hpvm_mgpu(&[
        "inspect",
        "-x",
        "c++",
        "-std=c++17",
        "-I",
        "tests/inputs/include",
        "-DSCALE=3",
        "tests/inputs/scale.hpvm",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(leaf, hint GPU, 1-D [n])"), "{text}");
    assert!(text.contains("launch of"), "{text}");
    // Without the macro the user's header refuses to compile: the flag really reaches clang.
    let out = hpvm_mgpu(&["inspect", "-x", "c++", "-I", "tests/inputs/include", "tests/inputs/scale.hpvm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("SCALE must be defined"), "{}", stderr(&out));
}

#[test]
fn llvm_ir_input_gives_the_same_graph() {
    let dir = std::env::temp_dir().join(format!("hpvm-mgpu-test-ll-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ll = dir.join("vecadd.ll");
    let status = std::process::Command::new(hpvm_core::toolchain::clang())
        .args([
            "-g",
            "-O0",
            "-Xclang",
            "-disable-O0-optnone",
            "-fno-discard-value-names",
            "-S",
            "-emit-llvm",
            "-Iinclude",
            "examples/vecadd.c",
            "-o",
        ])
        .arg(&ll)
        .current_dir(root())
        .status()
        .unwrap();
    assert!(status.success());
    let from_ll = hpvm_mgpu(&["inspect", ll.to_str().unwrap()]);
    let from_c = hpvm_mgpu(&["inspect", "examples/vecadd.c"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(from_ll.status.success(), "{}", stderr(&from_ll));
    // Same graph; only the first line (the input's name) differs.
    let body = |s: String| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(stdout(&from_ll)), body(stdout(&from_c)));
}

#[test]
fn launch_helpers_are_resolved_per_call_site() {
    let out = hpvm_mgpu(&["inspect", "tests/programs/helpers.c"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let launches: Vec<String> =
        stdout(&out).lines().filter(|l| l.starts_with("launch of")).map(str::to_string).collect();
    let roots: Vec<&str> = launches.iter().map(|l| l.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(roots, ["ScaleRoot", "ShiftRoot", "ShiftRoot", "MixRoot"], "{launches:?}");
    assert!(launches[0].contains("(through a helper called at tests/programs/helpers.c:83:3) in main"), "{launches:?}");
}
