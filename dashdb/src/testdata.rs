//! Fixtures shared by the unit tests.

use crate::schema::{Arg, Database, Node, ReadKind, Reason, Source, Split, SplitChoice, WriteKind};
use std::path::{Path, PathBuf};

/// The bytes the sample database claims to come from.
pub const MATMUL_SOURCE: &[u8] =
    b"void matmul(float *A, size_t as, float *B, size_t bs, float *C, size_t cs, int N);\n";

fn pointer(name: &str, index: u32, shape: &[&str], params: &[&str]) -> Arg {
    Arg {
        name: name.into(),
        index,
        llvm_type: "ptr".into(),
        size_bits: 64,
        element_size: 4,
        fundamental_type: "float".into(),
        dimensionality: shape.len() as u32,
        shape: shape.iter().map(|s| s.to_string()).collect(),
        pointer_level: 1,
        read_map: None,
        write_map: None,
        params: params.iter().map(|s| s.to_string()).collect(),
        read: ReadKind::None,
        write: WriteKind::None,
        write_through: None,
        reduction: None,
        read_valid_when: None,
    }
}

/// A valid database of two nodes: `matmul` (partitionable, exact maps, split along y) and
/// `histogram` (not partitionable: a data-dependent read and a may-write).
pub fn sample() -> Database {
    let dom = "0 <= x < N and 0 <= y < N";
    let matmul = Node {
        display: None,
        name: "matmul".into(),
        location: "examples/matmul.c:12".into(),
        hint: "GPU".into(),
        dims: 2,
        grid: vec!["N".into(), "N".into()],
        param_names: ["A", "bytes_A", "B", "bytes_B", "C", "bytes_C", "N"].map(String::from).to_vec(),
        block: None,
        valid_when: None,
        bounds: vec![],
        partitionable: true,
        specializable: false,
        merged_because: Vec::new(),
        mergeable: false,
        merge_fallback: false,
        products: vec![],
        reasons: vec![],
        split: Split { dims: vec![1], chosen_by: SplitChoice::Analysis },
        args: vec![
            Arg {
                read: ReadKind::Exact,
                read_map: Some(format!("[N] -> {{ I[x, y] -> A[y, k] : {dom} and 0 <= k < N }}")),
                ..pointer("A", 0, &["*", "N"], &["N"])
            },
            Arg {
                read: ReadKind::Exact,
                read_map: Some(format!("[N] -> {{ I[x, y] -> B[k, x] : {dom} and 0 <= k < N }}")),
                ..pointer("B", 2, &["*", "N"], &["N"])
            },
            Arg {
                write: WriteKind::Exact,
                write_through: None,
                reduction: None,
                write_map: Some(format!("[N] -> {{ I[x, y] -> C[y, x] : {dom} }}")),
                ..pointer("C", 4, &["*", "N"], &["N"])
            },
        ],
    };
    let histogram = Node {
        display: None,
        name: "histogram".into(),
        location: "examples/matmul.c:30".into(),
        hint: "GPU".into(),
        dims: 1,
        grid: vec!["n".into()],
        param_names: ["data", "bytes_data", "bins", "bytes_bins", "n"].map(String::from).to_vec(),
        block: None,
        valid_when: None,
        bounds: vec![],
        partitionable: false,
        specializable: false,
        merged_because: Vec::new(),
        mergeable: false,
        merge_fallback: false,
        products: vec![],
        reasons: vec![Reason {
            message: "`bins` is written at an index read from `data` (may-write)".into(),
            location: Some("examples/matmul.c:33:5".into()),
        }],
        split: Split { dims: vec![], chosen_by: SplitChoice::Analysis },
        args: vec![
            Arg {
                fundamental_type: "i32".into(),
                read: ReadKind::Exact,
                read_map: Some("[n] -> { I[x] -> data[x] : 0 <= x < n }".into()),
                ..pointer("data", 0, &["*"], &["n"])
            },
            Arg {
                fundamental_type: "i32".into(),
                read: ReadKind::DataDependent,
                write: WriteKind::May,
                write_through: None,
                reduction: None,
                write_map: Some("[n, nbins] -> { I[x] -> bins[b] : 0 <= x < n and 0 <= b < nbins }".into()),
                ..pointer("bins", 2, &["nbins"], &["n", "nbins"])
            },
        ],
    };
    Database {
        nodes: vec![matmul, histogram],
        ..Database::new(Source::new("examples/matmul.c", MATMUL_SOURCE), "hpvm-mgpu 0.1.0")
    }
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("dashdb-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The names in the directory, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
