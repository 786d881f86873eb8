//! Subcommands and the flags a C compiler driver user expects.

use crate::build::{self, BuildOptions};
use crate::error::{Error, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use frontend::{ClangOptions, Language};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "hpvm-mgpu", version, about = "Compile HPVM-C programs to run on all GPUs of a machine")]
pub struct Cli {
    /// Show each step and tool invocation (-vv: more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the dataflow graph of a program (nodes, edges, bindings, launch sites).
    Inspect {
        /// A C or C++ file using the HPVM-C API, or an LLVM IR file (.ll/.bc).
        file: PathBuf,
        /// Print Graphviz (dot) instead of text.
        #[arg(long)]
        dot: bool,
        #[command(flatten)]
        clang: ClangArgs,
    },
    /// Analyse which buffer elements each node instance reads and writes (Polly, ISL); print
    /// it per node and, with -o, write the analysis database (JSON).
    Analyze {
        /// A C or C++ file using the HPVM-C API, or an LLVM IR file (.ll/.bc).
        file: PathBuf,
        /// Write the database here (conventionally FILE.dashdb.json).
        #[arg(short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Split NODE's grid along these dimensions instead of the analysis's choice
        /// (`--split matmul=y`, `--split conv=x,y`).
        #[arg(long = "split", value_name = "NODE=DIMS")]
        split: Vec<String>,
        #[command(flatten)]
        clang: ClangArgs,
    },
    /// Work with analysis databases.
    #[command(subcommand)]
    Db(DbCommand),
    /// For the runtime: analyse one node of a program (its analysis input, LLVM bitcode on
    /// standard input) with one launch's values built in; print the database of that node.
    #[command(hide = true)]
    Specialize {
        /// The node's symbol.
        node: String,
        /// Map parameters and their values (`n=4096`, `gx=64`).
        #[arg(value_name = "NAME=VALUE")]
        values: Vec<String>,
    },
    /// Compile HPVM-C programs (and plain C/C++ files, objects) into an executable.
    Build {
        /// Source files (.c, .cpp...), LLVM IR (.ll/.bc), objects and archives (.o/.a).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output file (default a.out; with -c or --emit-llvm, the input's name with .o/.ll).
        #[arg(short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Optimization level, 0 to 3.
        #[arg(short = 'O', value_name = "LEVEL", default_value = "0", value_parser = clap::value_parser!(u8).range(0..=3))]
        opt: u8,
        /// Link with a library.
        #[arg(short = 'l', value_name = "LIB")]
        libs: Vec<String>,
        /// Add a directory to the library search path.
        #[arg(short = 'L', value_name = "DIR")]
        lib_dirs: Vec<PathBuf>,
        /// Stop after compiling: write objects.
        #[arg(short = 'c')]
        compile_only: bool,
        /// Stop after compiling: write the transformed, optimized LLVM IR (.ll).
        #[arg(long = "emit-llvm")]
        emit_llvm: bool,
        /// Relocatable device code (nvcc's `-rdc=true`, `-dc`): a kernel may call `__device__`
        /// functions and use `__device__` variables of other CUDA files. With -c each CUDA
        /// file's object carries its code as compiled, and the link compiles the device code
        /// of all of them as one.
        #[arg(long = "rdc")]
        rdc: bool,
        /// GPU architecture of the kernels (sm_50 .. sm_90a); repeat it for several. The
        /// executable carries machine code for each (ptxas, as nvcc's -gencode) and PTX for the
        /// oldest, which the driver compiles for any other GPU. Default: sm_80 and sm_90
        /// machine code (A100-class to H100-class GPUs), sm_80 PTX.
        #[arg(long = "gpu-arch", value_name = "ARCH")]
        gpu_arch: Vec<String>,
        /// Compile for the CPU only: no GPU kernels.
        #[arg(long = "no-gpu")]
        no_gpu: bool,
        /// Also write each module's PTX beside the output (OUT.ptx).
        #[arg(long = "emit-ptx")]
        emit_ptx: bool,
        /// Use this analysis database (from `hpvm-mgpu analyze -o`) instead of analysing
        /// again; refused unless it was made from this very source (one source file only).
        #[arg(long = "db", value_name = "FILE")]
        db: Option<PathBuf>,
        /// As for `analyze`: split NODE's grid along these dimensions.
        #[arg(long = "split", value_name = "NODE=DIMS")]
        split: Vec<String>,
        /// For tests of the analysis: record every buffer access of every leaf instance to
        /// the file named by HPVM_MGPU_TRACE at run time.
        #[arg(long = "trace-accesses", hide = true)]
        trace_accesses: bool,
        #[command(flatten)]
        clang: ClangArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Print an analysis database readably.
    Show {
        file: PathBuf,
        /// Only this node.
        #[arg(long = "node", value_name = "NODE")]
        node: Option<String>,
    },
}

/// `NODE=y` or `NODE=x,y` into the node's name and dimension numbers.
pub fn parse_split(text: &str) -> Result<(String, Vec<u32>)> {
    let bad = || Error::Usage(format!("--split {text}: expected NODE=DIMS, e.g. `--split matmul=y` or `conv=x,y`"));
    let (node, dims) = text.split_once('=').ok_or_else(bad)?;
    if node.is_empty() {
        return Err(bad());
    }
    let mut out = Vec::new();
    for d in dims.split(',') {
        let d = match d.trim() {
            "x" | "0" => 0,
            "y" | "1" => 1,
            "z" | "2" => 2,
            _ => return Err(bad()),
        };
        if out.contains(&d) {
            return Err(bad());
        }
        out.push(d);
    }
    Ok((node.to_string(), out))
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Lang {
    C,
    #[value(name = "c++")]
    Cxx,
    /// `cu` is nvcc's name.
    #[value(name = "cuda", alias = "cu")]
    Cuda,
}

impl From<Lang> for Language {
    fn from(l: Lang) -> Language {
        match l {
            Lang::C => Language::C,
            Lang::Cxx => Language::Cxx,
            Lang::Cuda => Language::Cuda,
        }
    }
}

/// The language each input of `build` is to be read as: that of the last `-x` before it on
/// the command line, as clang does (`-x c++ a.cc -x c b.c`); `None` where no `-x` precedes.
pub fn input_languages(matches: &clap::ArgMatches) -> Vec<Option<Language>> {
    let Some(("build", m)) = matches.subcommand() else { return vec![] };
    let files: Vec<usize> = m.indices_of("files").map(|i| i.collect()).unwrap_or_default();
    let langs: Vec<(usize, Lang)> = match (m.indices_of("lang"), m.get_many::<Lang>("lang")) {
        (Some(i), Some(v)) => i.zip(v.copied()).collect(),
        _ => vec![],
    };
    files.iter().map(|&f| langs.iter().rev().find(|(i, _)| *i < f).map(|&(_, l)| l.into())).collect()
}

/// Flags passed on to clang.
#[derive(Debug, Args)]
pub struct ClangArgs {
    /// Add a directory to the include path.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Define a macro (NAME or NAME=VALUE).
    #[arg(short = 'D', value_name = "MACRO")]
    pub define: Vec<String>,
    /// Undefine a macro (after every -D, as nvcc and clang order them).
    #[arg(short = 'U', value_name = "MACRO")]
    pub undefine: Vec<String>,
    /// Treat the inputs that follow as this language, whatever their extension (as with
    /// clang, `-x` may be given again for later inputs).
    #[arg(short = 'x', value_name = "LANG")]
    pub lang: Vec<Lang>,
    /// Language standard (-std=c11, -std=c++17...).
    #[arg(long = "std", value_name = "STD")]
    pub std: Option<String>,
    /// Host code with OpenMP, linked with LLVM's libomp (`-fopenmp`, nvcc's `-Xcompiler
    /// -fopenmp`); kernels are unaffected.
    #[arg(long = "openmp")]
    pub openmp: bool,
    /// Kernels without fused multiply-adds (nvcc's `--fmad=false`): each multiplication and
    /// addition rounded on its own, on every device.
    #[arg(long = "no-fmad")]
    pub no_fmad: bool,
    /// nvcc's `-use_fast_math`: GPU kernels compute `powf`, `expf`, `sinf`... with their
    /// fast intrinsics (`__powf`...), divide approximately and flush denormals, as nvcc's do;
    /// simulated devices and the host compute them exactly.
    #[arg(long = "fast-math")]
    pub fast_math: bool,
}

impl ClangArgs {
    fn options(&self, verbose: bool) -> ClangOptions {
        ClangOptions {
            include_dirs: self.include.clone(),
            quote_dirs: Vec::new(),
            defines: self.define.clone(),
            undefines: self.undefine.clone(),
            language: self.lang.last().map(|&l| l.into()),
            std: self.std.clone(),
            verbose,
            opt_level: None,
            cuda_arch: None,
            openmp: self.openmp,
            no_fmad: self.no_fmad,
            fast_math: self.fast_math,
        }
    }
}

/// The architectures the build assembles machine code for when none is asked: A100-class
/// (which sm_86 and sm_89 GPUs run too) and H100-class.
const DEFAULT_SASS: [&str; 2] = ["sm_80", "sm_90"];

/// The architecture of the PTX: the oldest asked for (its PTX runs on all the others), or
/// the oldest default. A name that is no architecture is passed on for the backend to refuse.
fn ptx_arch(asked: &[String]) -> String {
    if let Some(bad) = asked.iter().find(|a| contract::sass::Arch::parse(a).is_none()) {
        return bad.clone();
    }
    let key = |a: &String| contract::sass::Arch::parse(a).map(|x| (x.major, x.minor, x.specific));
    asked.iter().min_by_key(|a| key(a)).cloned().unwrap_or_else(|| DEFAULT_SASS[0].to_string())
}

/// The architectures to assemble machine code for: those asked, once each, or the default.
fn sass_archs(mut asked: Vec<String>) -> Vec<String> {
    if asked.is_empty() {
        return DEFAULT_SASS.map(str::to_string).to_vec();
    }
    let mut seen = std::collections::HashSet::new();
    asked.retain(|a| seen.insert(a.clone()));
    asked
}

/// C compilers spell it `-std=c11`, and nvcc `-arch=sm_90` (or `--gpu-architecture=sm_90`);
/// clap wants long options with two dashes, and ours is `--gpu-arch`. nvcc's other spellings
/// are taken as nvcc means them ([`nvcc_flag`]), so a Makefile's nvcc line works unchanged.
pub fn normalize_args(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        let Some(s) = a.to_str() else {
            out.push(a);
            continue;
        };
        // Flags whose value may come as the next word.
        let (flag, value) = match s.split_once('=') {
            Some((f, v)) if NVCC_WITH_VALUE.contains(&f) => (f, Some(v.to_string())),
            _ if NVCC_WITH_VALUE.contains(&s) => (s, args.next().and_then(|v| v.into_string().ok())),
            _ => (s, None),
        };
        match nvcc_flag(flag, value.as_deref()) {
            // `-c -dc` says it twice, and `-dc -rdc=true` too.
            Some(Nvcc::Args(words)) => {
                for w in words {
                    if !matches!(w.as_str(), "-c" | "--rdc") || !out.iter().any(|o| *o == *w) {
                        out.push(OsString::from(w));
                    }
                }
            }
            Some(Nvcc::Refuse(why)) => {
                eprintln!("hpvm-mgpu: error: {why}");
                std::process::exit(1);
            }
            None => out.push(a),
        }
    }
    out
}

/// nvcc's flags that take a value, as `-flag value` or `-flag=value`.
const NVCC_WITH_VALUE: [&str; 42] = [
    "-rdc",
    "--relocatable-device-code",
    "-Xcudafe",
    "--cudafe-options",
    "-Xnvlink",
    "--nvlink-options",
    "-t",
    "--threads",
    "-keep-dir",
    "--keep-dir",
    "-fmad",
    "--fmad",
    "-ftz",
    "--ftz",
    "-prec-div",
    "--prec-div",
    "-prec-sqrt",
    "--prec-sqrt",
    "-Xcompiler",
    "--compiler-options",
    "-Xlinker",
    "--linker-options",
    "-Xptxas",
    "--ptxas-options",
    "-gencode",
    "--generate-code",
    "-ccbin",
    "--compiler-bindir",
    "-arch",
    "--default-stream",
    "-maxrregcount",
    "--maxrregcount",
    "-cudart",
    "--cudart",
    "-Werror",
    "--Werror",
    "-diag-suppress",
    "--diag-suppress",
    "-diag-warn",
    "--diag-warn",
    "-diag-error",
    "--diag-error",
];

/// What an nvcc flag becomes.
#[derive(Debug, PartialEq)]
enum Nvcc {
    /// These words of ours (none: nothing to do here).
    Args(Vec<String>),
    /// A flag we do not take, and why.
    Refuse(String),
}

/// One nvcc flag (with its value, where it has one) in our terms; `None`: not nvcc's.
fn nvcc_flag(flag: &str, value: Option<&str>) -> Option<Nvcc> {
    let none = || Some(Nvcc::Args(Vec::new()));
    let value = value.unwrap_or("");
    match flag {
        "-std" | "--std" => None,
        // gcc's and clang's spelling, which Makefiles pass to nvcc too.
        "-fopenmp" => Some(Nvcc::Args(vec!["--openmp".into()])),
        f if f.starts_with("-fopenmp=") => Some(Nvcc::Args(vec!["--openmp".into()])),
        f if f.starts_with("-std=") => Some(Nvcc::Args(vec![format!("-{f}")])),
        // Every architecture, or the machine's: the default ones, whose PTX the driver compiles
        // for any other GPU.
        "-arch" | "--gpu-architecture" if matches!(value, "native" | "all" | "all-major") => none(),
        "-arch" | "--gpu-architecture" => Some(Nvcc::Args(vec![format!("--gpu-arch={}", sm_of(value))])),
        f if f.starts_with("--gpu-architecture=") => nvcc_flag("--gpu-architecture", f.split_once('=').map(|p| p.1)),
        // `arch=compute_80,code=sm_80`: the code's architecture is what the build targets.
        "-gencode" | "--generate-code" => {
            let code = value.split(',').find_map(|p| p.strip_prefix("code=")).unwrap_or("");
            let code = code.trim_matches(|c| c == '"' || c == '[' || c == ']').split(',').next().unwrap_or("");
            match code.strip_prefix("sm_").or_else(|| code.strip_prefix("compute_")) {
                Some(n) => Some(Nvcc::Args(vec![format!("--gpu-arch=sm_{n}")])),
                None => Some(Nvcc::Refuse(format!("-gencode {value}: expected arch=compute_XX,code=sm_XX"))),
            }
        }
        // The host compiler's flags: include paths, macros and OpenMP are ours too; warnings,
        // debug info and code-generation tuning change no result and are left to our own
        // choices.
        "-Xcompiler" | "--compiler-options" => {
            let mut words = Vec::new();
            for w in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                if w == "-fopenmp" || w.starts_with("-fopenmp=") {
                    words.push("--openmp".to_string());
                    continue;
                }
                if w.starts_with("-I") || w.starts_with("-D") || w.starts_with("-U") || w.starts_with("-std=") {
                    words.push(if w.starts_with("-std=") { format!("-{w}") } else { w.to_string() });
                }
            }
            Some(Nvcc::Args(words))
        }
        "-Xlinker" | "--linker-options" => {
            Some(Nvcc::Refuse(format!("{flag} {value}: linker options are not taken yet; give libraries as -l and -L")))
        }
        // Device-code options of NVIDIA's toolchain: our device code is LLVM's, with line
        // information, one module per file, and `constexpr` and lambdas as clang's CUDA takes
        // them.
        "-Xptxas" | "--ptxas-options" | "-ccbin" | "--compiler-bindir" | "-maxrregcount" | "--maxrregcount" => none(),
        // Launches run in program order on every stream, which per-thread default streams allow.
        "--default-stream" => none(),
        "--use_fast_math" | "-use_fast_math" => Some(Nvcc::Args(vec!["--fast-math".into()])),
        "--expt-relaxed-constexpr"
        | "-expt-relaxed-constexpr"
        | "--expt-extended-lambda"
        | "-expt-extended-lambda"
        | "--extended-lambda"
        | "-extended-lambda"
        | "-lineinfo"
        | "--generate-line-info"
        | "-m64"
        | "-Wno-deprecated-gpu-targets"
        | "-Wno-deprecated-declarations"
        | "-restrict"
        | "--restrict"
        | "--resource-usage"
        | "-res-usage" => none(),
        "-rdc" | "--relocatable-device-code" => match value {
            "true" => Some(Nvcc::Args(vec!["--rdc".into()])),
            _ => none(),
        },
        f if f.starts_with("-maxrregcount=") || f.starts_with("--ptxas-options=") || f.starts_with("-Xptxas=") => {
            none()
        }
        // Options of NVIDIA's front end, device linker and driver (parallel compilation, kept
        // intermediates): ours has no such stages.
        "-Xcudafe"
        | "--cudafe-options"
        | "-Xnvlink"
        | "--nvlink-options"
        | "-t"
        | "--threads"
        | "-keep-dir"
        | "--keep-dir"
        | "-keep"
        | "--keep"
        | "-allow-unsupported-compiler"
        | "--allow-unsupported-compiler" => none(),
        "-w" | "--disable-warnings" => none(),
        // Host debug information: the build keeps line tables for the runtime's messages
        // (a crash or a race names the program's file:line) whatever is asked.
        "-g" | "--debug" => none(),
        // `-dc` is `-c -rdc=true`; `-dw` compiles whole-program device code, as `-c` does.
        "-dc" | "--device-c" => Some(Nvcc::Args(vec!["-c".into(), "--rdc".into()])),
        "-dw" | "--device-w" => Some(Nvcc::Args(vec!["-c".into()])),
        // Flushing denormals and approximate division and square roots alone only lose
        // precision: kept IEEE (`-use_fast_math`, which programs ask for speed, is taken).
        // Fused multiply-adds change results either way, so `--fmad=false` is taken as asked.
        "-ftz" | "--ftz" | "-prec-div" | "--prec-div" | "-prec-sqrt" | "--prec-sqrt" => none(),
        "-fmad" | "--fmad" => match value {
            "false" => Some(Nvcc::Args(vec!["--no-fmad".into()])),
            "true" => none(),
            _ => Some(Nvcc::Refuse(format!("{flag}={value}: expected true or false"))),
        },
        // NVIDIA's runtime: ours is linked in its place, however nvcc was asked to link its own.
        "-lcudart" | "-lcudart_static" | "-lcudadevrt" => none(),
        // The driver's library: a program that calls it is told so at the link
        // (`libraries::explain_undefined`); one that only names it builds.
        "-lcuda" => none(),
        "-cudart" | "--cudart" => match value {
            "none" | "shared" | "static" => none(),
            _ => Some(Nvcc::Refuse(format!("{flag} {value}: expected none, shared or static"))),
        },
        // nvcc's own diagnostics (its warning kinds made errors, front-end diagnostics by
        // number): no stage of ours issues them.
        "-Werror" | "--Werror" | "-diag-suppress" | "--diag-suppress" | "-diag-warn" | "--diag-warn"
        | "-diag-error" | "--diag-error" => none(),
        "--display-error-number"
        | "-err-no"
        | "--no-display-error-number"
        | "-no-err-no"
        | "-Wreorder"
        | "-Wdefault-stream-launch"
        | "-Wmissing-launch-bounds"
        | "-Wext-lambda-captures-this" => none(),
        "-G" | "--device-debug" => {
            eprintln!("hpvm-mgpu: note: -G (device debugging) is taken as line information only");
            none()
        }
        _ => None,
    }
}

/// `sm_80`, `compute_80` or `80` as `sm_80`.
fn sm_of(arch: &str) -> String {
    let n = arch.strip_prefix("sm_").or_else(|| arch.strip_prefix("compute_")).unwrap_or(arch);
    format!("sm_{n}")
}

/// Runs the command; `languages` are [`input_languages`] of the command line.
pub fn run(cli: Cli, languages: Vec<Option<Language>>) -> Result<()> {
    let verbose = cli.verbose > 0;
    match cli.command {
        Command::Inspect { file, dot, clang } => {
            let graph = frontend::load_graph(&file, &clang.options(verbose))?;
            let out = if dot { hpvm_core::print::to_dot(&graph) } else { hpvm_core::print::to_text(&graph) };
            print!("{out}");
            Ok(())
        }
        Command::Analyze { file, output, split, clang } => {
            if let Some(out) = output.as_deref().filter(|out| build::same_file(&file, out)) {
                return Err(Error::Usage(format!(
                    "the output file `{}` is also the input; refusing to overwrite it",
                    out.display()
                )));
            }
            let split = split.iter().map(|s| parse_split(s)).collect::<Result<Vec<_>>>()?;
            let db = crate::analyze::analyze_file_isolated(
                &file,
                &clang.options(verbose),
                &analysis::Options { split, ..Default::default() },
            )?;
            print!("{}", analysis::report::report(&db));
            if let Some(out) = output {
                db.save(&out)?;
            }
            Ok(())
        }
        Command::Specialize { node, values } => {
            let values = values
                .iter()
                .map(|v| {
                    let (name, value) =
                        v.split_once('=').ok_or_else(|| Error::Usage(format!("`{v}`: expected NAME=VALUE")))?;
                    let value =
                        value.parse::<i64>().map_err(|_| Error::Usage(format!("`{v}`: the value is no integer")))?;
                    Ok((name.to_string(), value))
                })
                .collect::<Result<Vec<_>>>()?;
            print!("{}", crate::analyze::specialize(&node, values)?);
            Ok(())
        }
        Command::Db(DbCommand::Show { file, node }) => {
            let db = dashdb::Database::load(&file, None)?;
            print!("{}", dashdb::show(&db, node.as_deref())?);
            Ok(())
        }
        Command::Build {
            files,
            output,
            opt,
            libs,
            lib_dirs,
            compile_only,
            emit_llvm,
            rdc,
            gpu_arch,
            no_gpu,
            emit_ptx,
            db,
            split,
            trace_accesses,
            clang,
        } => build::build(&BuildOptions {
            db,
            split: split.iter().map(|s| parse_split(s)).collect::<Result<Vec<_>>>()?,
            trace_accesses,
            languages: if languages.len() == files.len() { languages } else { vec![None; files.len()] },
            inputs: files,
            output,
            opt_level: opt,
            clang: clang.options(verbose),
            libs,
            lib_dirs,
            compile_only,
            emit_llvm,
            rdc,
            gpu_arch: (!no_gpu).then(|| ptx_arch(&gpu_arch)),
            sass: if no_gpu { vec![] } else { sass_archs(gpu_arch) },
            emit_ptx,
        }),
    }
}

/// Prints an error the way compilers do: one `file:line:col: error: ...` line per problem.
pub fn report(e: &Error) {
    match e {
        Error::Reported => return,
        // Already `file: error: ...`.
        Error::Crashed(message) => {
            eprintln!("{message}");
            return;
        }
        Error::Core(hpvm_core::Error::Invalid(diags))
        | Error::Frontend(frontend::Error::Graph(hpvm_core::Error::Invalid(diags))) => {
            for d in diags {
                eprintln!("{d}");
            }
        }
        // Already `file:line: error: ...`, as compilers write it.
        Error::Frontend(frontend::Error::Cuda(message)) => {
            eprintln!("{message}");
            return;
        }
        _ => {}
    }
    eprintln!("hpvm-mgpu: error: {e}");
}

#[cfg(test)]
mod nvcc_tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from)).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn nvcc_spellings_become_ours() {
        assert_eq!(
            norm(&["build", "-arch=sm_60", "-Xcompiler", "-Wall,-O3,-I/x", "-std=c++14", "a.cu"]),
            ["build", "--gpu-arch=sm_60", "-I/x", "--std=c++14", "a.cu"]
        );
        assert_eq!(
            norm(&["build", "-gencode", "arch=compute_80,code=sm_80", "a.cu"]),
            ["build", "--gpu-arch=sm_80", "a.cu"]
        );
        assert_eq!(
            norm(&["build", "-gencode=arch=compute_90,code=sm_90", "a.cu"]),
            ["build", "--gpu-arch=sm_90", "a.cu"]
        );
        assert_eq!(norm(&["build", "-arch", "sm_70", "a.cu"]), ["build", "--gpu-arch=sm_70", "a.cu"]);
        assert_eq!(
            norm(&["build", "--use_fast_math", "--expt-relaxed-constexpr", "-lineinfo", "-rdc=true", "a.cu"]),
            ["build", "--fast-math", "--rdc", "a.cu"]
        );
        assert_eq!(norm(&["build", "-use_fast_math", "a.cu"]), ["build", "--fast-math", "a.cu"]);
        assert_eq!(norm(&["build", "-ccbin", "g++", "-Xptxas", "-v", "a.cu"]), ["build", "a.cu"]);
        assert_eq!(norm(&["build", "-g", "-O3", "--debug", "a.cu"]), ["build", "-O3", "a.cu"]);
        assert_eq!(nvcc_flag("-Xcompiler", Some("-Wall,-fopenmp")), Some(Nvcc::Args(vec!["--openmp".into()])));
        assert_eq!(nvcc_flag("-fopenmp", None), Some(Nvcc::Args(vec!["--openmp".into()])));
        assert_eq!(nvcc_flag("-o", None), None);
        // nvcc's driver options with no stage of ours, and relocatable device code.
        assert_eq!(
            norm(&["build", "-Xcudafe", "--diag_suppress=177", "-t", "4", "-arch=native", "--keep", "-w", "a.cu"]),
            ["build", "a.cu"]
        );
        assert_eq!(norm(&["build", "-c", "-dc", "a.cu", "-o", "a.o"]), ["build", "-c", "--rdc", "a.cu", "-o", "a.o"]);
        assert_eq!(norm(&["build", "-dc", "-rdc=true", "a.cu"]), ["build", "-c", "--rdc", "a.cu"]);
        assert_eq!(norm(&["build", "-rdc", "true", "-dw", "a.cu"]), ["build", "--rdc", "-c", "a.cu"]);
        assert_eq!(norm(&["build", "--relocatable-device-code=false", "a.cu"]), ["build", "a.cu"]);
        assert_eq!(
            norm(&["build", "--fmad=false", "-ftz=true", "--prec-div", "false", "a.cu"]),
            ["build", "--no-fmad", "a.cu"]
        );
        assert_eq!(
            norm(&["build", "-fmad=true", "-arch", "all", "--gpu-architecture=native", "a.cu"]),
            ["build", "a.cu"]
        );
        assert_eq!(norm(&["build", "--gpu-architecture=sm_80", "a.cu"]), ["build", "--gpu-arch=sm_80", "a.cu"]);
        // nvcc's runtime choice and its own diagnostics, with their values as the next word
        // or after `=`: `-cudart shared` was read as `-c -u...` before.
        assert_eq!(
            norm(&["build", "-cudart", "shared", "--cudart=static", "-Werror", "cross-execution-space-call", "a.cu"]),
            ["build", "a.cu"]
        );
        assert_eq!(
            norm(&["build", "-diag-suppress", "177,550", "--diag-warn=20012", "--display-error-number", "a.cu"]),
            ["build", "a.cu"]
        );
        // The driver's library is named by programs that do not call it (HeCBench gerbil).
        assert_eq!(norm(&["build", "a.cu", "-lcudart", "-lcuda", "-lm"]), ["build", "a.cu", "-lm"]);
        assert_eq!(
            nvcc_flag("-cudart", Some("dynamic")),
            Some(Nvcc::Refuse("-cudart dynamic: expected none, shared or static".into()))
        );
    }
}
