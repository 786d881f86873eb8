//! CUDA sources in: a `.cu` file becomes a module of the same shape as an HPVM-C program's,
//! so the graph builder, the verifier, the analysis and both backends take it unchanged.
//!
//! clang-19 compiles the two halves of the file apart, as gpucc does: the device half (NVPTX
//! IR: the kernels, with CUDA's special registers, address spaces and barriers) and the host
//! half (x86 IR: the program, with a stub per kernel that calls `cudaLaunchKernel`). Then:
//!
//! - [`device`] retargets the device half to the host and rewrites each `__global__` kernel
//!   into the graph a GPU launch is (a root, a grid of blocks, a leaf that is the block of
//!   threads, and an allocation node for `__shared__` memory): `threadIdx`/`blockIdx`/
//!   `blockDim`/`gridDim` become instance ids and counts, `__syncthreads` a barrier,
//!   `__device__` functions are inlined, `__device__`/`__constant__` variables become buffer
//!   arguments bound to the host's shadow variables (which `cudaMemcpyToSymbol` writes);
//! - the halves are linked into one module, and [`launchers`] adds, per kernel, a host
//!   function launching its root from `cudaLaunchKernel`'s arguments (each pointer's extent
//!   found from the runtime's buffers) and registers it under the kernel's stub, which the
//!   runtime's `cudaLaunchKernel` looks up.
//!
//! Invariants:
//! - The module handed on is host IR only: no NVPTX intrinsic, address space or kernel
//!   annotation survives; what cannot be rewritten is an [`Error::Cuda`] naming the user's
//!   file:line and the construct, never a silently different program.
//! - A leaf keeps its kernel's symbol, so nodes, databases and messages use the kernel's name.

mod asm;
mod consts;
mod device;
mod hoist;
mod launchers;

use crate::clang::{add_ir_flags, add_user_flags, run_clang, run_clang_quietly, GCC_FOLDS_MATH, GCC_LENIENT_CXX};
use crate::options::ClangOptions;
use crate::{Error, Result};
use hpvm_core::scratch::ScratchDir;
use hpvm_core::toolchain::clang;
use inkwell::context::Context;
use inkwell::module::Module;
use std::path::Path;
use std::process::Command;

/// nvcc's host overloads of `min` and `max`, which clang's CUDA headers lack (see the file).
const HOST_MINMAX_H: &str = include_str!("host_minmax.h");

/// `__NVCC__`, which programs test, defined after NVIDIA's headers have told clang from nvcc
/// (see the file).
const NVCC_MACROS_H: &str = include_str!("nvcc_macros.h");

/// The cache-hinted loads and stores clang's CUDA headers lack (see the file).
const CACHE_HINTS_H: &str = include_str!("cache_hints.h");

/// Texture fetches in software, which the device half's `tex.*` statements become (see the
/// file and [`asm`]).
const TEXTURES_H: &str = include_str!("textures.h");

/// The GPU architecture device code is compiled for when none is given (`__CUDA_ARCH__`).
pub const DEFAULT_ARCH: &str = "sm_80";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Half {
    Device,
    Host,
}

/// Compiles, rewrites and links a CUDA source into one host module (not yet [`crate::ir::prepare`]d).
pub fn load<'ctx>(ctx: &'ctx Context, path: &Path, opts: &ClangOptions) -> Result<Module<'ctx>> {
    load_halves(ctx, &[compile_halves(path, opts)?])
}

/// A CUDA source's two halves as clang leaves them, before they are rewritten: what an object
/// compiled with relocatable device code (`-rdc`, `-dc`) carries, so that the link rewrites the
/// halves of all its sources together, as one source ([`load_halves`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halves {
    /// The source's path, for messages.
    pub source: String,
    /// The device half: NVPTX IR, as text.
    pub device: String,
    /// The host half: bitcode for the host.
    pub host: Vec<u8>,
}

/// Compiles the two halves of CUDA source `path`.
pub fn compile_halves(path: &Path, opts: &ClangOptions) -> Result<Halves> {
    let scratch = ScratchDir::new("cuda").map_err(|e| Error::io("temporary directory", e))?;
    let (dev_ll, host_bc) = (scratch.path().join("device.ll"), scratch.path().join("host.bc"));
    let minmax = scratch.path().join("hpvm_host_minmax.h");
    std::fs::write(&minmax, HOST_MINMAX_H).map_err(|e| Error::io("temporary hpvm_host_minmax.h", e))?;
    let nvcc = scratch.path().join("hpvm_nvcc_macros.h");
    std::fs::write(&nvcc, NVCC_MACROS_H).map_err(|e| Error::io("temporary hpvm_nvcc_macros.h", e))?;
    // `k<< <grid, block>> >(...)` and `asm("mov.u64 %0, %globaltimer;" : ...)`, which nvcc
    // takes (`respell`): compiled from a respelled copy that
    // `#line` keeps at the user's file and lines, its directory searched first for quoted
    // includes as the original's would be.
    let original = std::fs::read_to_string(path).ok();
    let respelled = original.as_deref().and_then(respell);
    let copy = scratch.path().join(path.file_name().unwrap_or(std::ffi::OsStr::new("source.cu")));
    let write_copy = |text: &str| {
        let shown = path.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
        std::fs::write(&copy, format!("#line 1 \"{shown}\"\n{text}"))
            .map_err(|e| Error::io("temporary copy of the source", e))
    };
    let mut opts_here = opts.clone();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    opts_here.quote_dirs.insert(0, dir.to_path_buf());
    let (mut src, mut opts) = match &respelled {
        Some(text) => {
            write_copy(text)?;
            (copy.clone(), &opts_here)
        }
        None => (path.to_path_buf(), opts),
    };
    let textures = scratch.path().join("hpvm_textures.h");
    std::fs::write(&textures, TEXTURES_H).map_err(|e| Error::io("temporary hpvm_textures.h", e))?;
    let hints = scratch.path().join("hpvm_cache_hints.h");
    std::fs::write(&hints, CACHE_HINTS_H).map_err(|e| Error::io("temporary hpvm_cache_hints.h", e))?;
    let pre = [minmax.as_path(), nvcc.as_path(), textures.as_path(), hints.as_path()];
    // `__shared__` objects whose constructors do something, which clang refuses and nvcc
    // takes without running them (`unconstructed_shared`): found by the device half's
    // messages, then compiled from a copy declaring each as uninitialized storage.
    let (cmd, clang) = half_command(&src, opts, Half::Device, &dev_ll, &pre)?;
    let (ok, said) = run_clang_quietly(cmd, &clang, opts)?;
    if !ok {
        let at = shared_with_constructors(&said, &path.display().to_string());
        let fixed = match (at.is_empty(), respelled.as_deref().or(original.as_deref())) {
            (false, Some(text)) => unconstructed_shared(text, &at),
            _ => None,
        };
        let Some(text) = fixed else {
            eprint!("{said}");
            return Err(Error::CompileFailed { file: path.display().to_string() });
        };
        write_copy(&text)?;
        (src, opts) = (copy.clone(), &opts_here);
        compile_half(&src, opts, Half::Device, &dev_ll, &pre).map_err(|e| named(e, path))?;
    } else {
        eprint!("{said}");
    }
    compile_half(&src, opts, Half::Host, &host_bc, &pre).map_err(|e| named(e, path))?;
    let read = |p: &Path| std::fs::read(p).map_err(|e| Error::io(&p.display().to_string(), e));
    Ok(Halves {
        source: path.display().to_string(),
        device: String::from_utf8_lossy(&read(&dev_ll)?).into_owned(),
        host: read(&host_bc)?,
    })
}

/// Rewrites and links the halves of one or more CUDA sources into one host module (not yet
/// [`crate::ir::prepare`]d): several sources' device code is linked before it is
/// rewritten, so that their kernels may call one another's `__device__` functions, as with
/// nvcc's relocatable device code.
pub fn load_halves<'ctx>(ctx: &'ctx Context, halves: &[Halves]) -> Result<Module<'ctx>> {
    let shown = halves.iter().map(|h| h.source.as_str()).collect::<Vec<_>>().join(", ");
    let device: Vec<(&str, &str)> = halves.iter().map(|h| (h.source.as_str(), h.device.as_str())).collect();
    let device::Read { module: dev, kernels, renames } = device::read(ctx, &device)?;
    let mut linked: Option<Module<'ctx>> = None;
    for (h, renamed) in halves.iter().zip(&renames) {
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(&h.host, "host");
        let module = Module::parse_bitcode_from_buffer(&buf, ctx)
            .map_err(|e| Error::BadIr { file: h.source.clone(), message: e.to_string() })?;
        // The host's stubs and shadows of kernels and variables renamed on the device side.
        for r in renamed {
            if r.kernel {
                if let Some(stub) = launchers::stub_of(&module, &r.from) {
                    let name = format!("{}{}", stub.get_name().to_string_lossy(), &r.to[r.from.len()..]);
                    stub.as_global_value().set_name(&name);
                }
            } else if let Some(shadow) = module.get_global(&r.from) {
                shadow.set_name(&r.to);
            }
        }
        match &linked {
            None => linked = Some(module),
            Some(all) => all.link_in_module(module).map_err(|e| {
                Error::Cuda(format!("{}: error: linking its host code with the other files': {e}", h.source))
            })?,
        }
    }
    let host = linked.ok_or_else(|| Error::Cuda("no CUDA source to load".into()))?;
    let symbols = device::symbols(&dev, &host);
    let kernels = device::convert(&dev, &kernels, &host)?;
    host.link_in_module(dev).map_err(|e| Error::Llvm(e.to_string()))?;
    device::initialize_shadows(&host);
    launchers::add(&host, &kernels, &symbols)?;
    host.verify().map_err(|e| Error::Llvm(format!("{shown}: the rewritten CUDA module is invalid: {e}")))?;
    Ok(host)
}

/// `text` with nvcc's spellings that clang refuses respelled ([`respell_launches`],
/// [`respell_asm`], [`respell_alignas`]); `None` when there is none.
fn respell(text: &str) -> Option<String> {
    let mut changed = None;
    for pass in [respell_launches, respell_asm, respell_alignas] {
        if let Some(t) = pass(changed.as_deref().unwrap_or(text)) {
            changed = Some(t);
        }
    }
    changed
}

/// `text` with every `__shared__ alignas(...)` (or `__device__`, `__constant__`,
/// `__managed__`) written `alignas(...) __shared__`: nvcc takes the alignment after the
/// memory space (NVIDIA's globalToShmemAsyncCopy), clang only before it, since its memory
/// spaces are GNU attributes, after which no C++11 attribute may come. On the same line, so
/// that lines stay where they were. `None` when there is none.
fn respell_alignas(text: &str) -> Option<String> {
    const SPACES: [&str; 4] = ["__shared__", "__device__", "__constant__", "__managed__"];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("alignas") {
        let before = rest[..at].trim_end_matches([' ', '\t']);
        let space = SPACES.iter().find(|s| before.ends_with(*s));
        let open = rest[at + 7..].trim_start_matches([' ', '\t']);
        let (Some(space), true) = (space, open.starts_with('(')) else {
            out.push_str(&rest[..at + 7]);
            rest = &rest[at + 7..];
            continue;
        };
        // The matching `)` of `alignas(`, on this line.
        let from = rest.len() - open.len();
        let mut depth = 0usize;
        let close = rest[from..].char_indices().take_while(|&(_, c)| c != '\n').find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(from + i + 1);
                    }
                }
                _ => {}
            }
            None
        });
        let Some(close) = close else {
            out.push_str(&rest[..at + 7]);
            rest = &rest[at + 7..];
            continue;
        };
        let start = before.len() - space.len();
        out.push_str(&rest[..start]);
        out.push_str(&rest[at..close]);
        out.push(' ');
        out.push_str(space);
        rest = &rest[close..];
        changed = true;
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// `text` with the `%` of every register name in an extended `asm` statement's template
/// doubled: nvcc passes `%globaltimer` or `%laneid` through to PTX as written, while clang
/// takes a lone `%` for the start of an operand and refuses the letters after it. Kept as they
/// are: `%%`, operands (`%0`, `%[name]`) and one-letter modifiers before one (`%k1`, which a
/// host's x86 `asm` uses). A basic `asm` (no `:`), whose `%` clang takes as written, is left
/// alone. `None` when nothing changed.
fn respell_asm(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let word = |i: usize| i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_');
    // Byte offsets of the `%` to double.
    let mut doubled = Vec::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("asm").map(|a| a + i) {
        i = at + 3;
        if (at > 0 && word(at - 1)) || word(at + 3) {
            continue;
        }
        // Qualifiers, then the parenthesis.
        let mut j = at + 3;
        loop {
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let start = j;
            while word(j) {
                j += 1;
            }
            if !matches!(&text[start..j], "volatile" | "__volatile__" | "goto" | "inline") {
                j = start;
                break;
            }
        }
        if j >= b.len() || b[j] != b'(' {
            continue;
        }
        j += 1;
        // The template: string literals up to the first `:` (extended) or `)` (basic).
        let mut found = Vec::new();
        let extended = loop {
            match b.get(j) {
                None => break false,
                Some(b'"') => {
                    j += 1;
                    while j < b.len() && b[j] != b'"' {
                        if b[j] == b'\\' {
                            j += 1;
                        } else if b[j] == b'%' {
                            if b.get(j + 1) == Some(&b'%') {
                                j += 1;
                            } else {
                                let letters =
                                    b[j + 1..].iter().take_while(|c| c.is_ascii_alphabetic() || **c == b'_').count();
                                let next = b.get(j + 1 + letters).copied().unwrap_or(b' ');
                                let operand = letters == 1 && (next.is_ascii_digit() || next == b'[');
                                if letters > 0 && !operand {
                                    found.push(j);
                                }
                            }
                        }
                        j += 1;
                    }
                    j += 1;
                }
                Some(b':') => break true,
                Some(b')' | b';') => break false,
                Some(_) => j += 1,
            }
        };
        if extended {
            doubled.extend(found);
        }
        i = j.max(i);
    }
    if doubled.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + doubled.len());
    let mut from = 0;
    for at in doubled {
        out.push_str(&text[from..=at]);
        out.push('%');
        from = at + 1;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// `text` with every launch written `<< <...>> >` respelled `<<<...>>>` (nvcc's lexer takes the
/// spaces, clang's does not); `None` when there is none. Only a `<<` followed by spaces and a
/// single `<` opens one (no valid C++ has that), and only the first `>>` spaces `>` after it on
/// the same line closes it, so templates closing `> >` elsewhere are left alone.
fn respell_launches(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let mut rest = line;
        let mut done = String::new();
        while let Some(at) = rest.find("<<") {
            let after = &rest[at + 2..];
            let spaces = after.len() - after.trim_start_matches([' ', '\t']).len();
            let next = &after[spaces..];
            if spaces == 0 || !next.starts_with('<') || next.starts_with("<<") {
                done.push_str(&rest[..at + 2]);
                rest = after;
                continue;
            }
            done.push_str(&rest[..at]);
            done.push_str("<<<");
            rest = &next[1..];
            changed = true;
            // Its closer on the same line: `>>` spaces `>`.
            if let Some(close) = rest.find(">>") {
                let after = &rest[close + 2..];
                let spaces = after.len() - after.trim_start_matches([' ', '\t']).len();
                if spaces > 0 && after[spaces..].starts_with('>') {
                    done.push_str(&rest[..close]);
                    done.push_str(">>>");
                    rest = &after[spaces + 1..];
                }
            }
        }
        done.push_str(rest);
        out.push_str(&done);
    }
    changed.then_some(out)
}

/// One half of a CUDA source to LLVM IR, as [`crate::c::compile_source`] does for C.
/// libdevice is not linked (`-nocudalib`): math calls stay calls of `__nv_*` functions, which
/// [`device`] maps to what both backends know.
fn compile_half(src: &Path, opts: &ClangOptions, half: Half, out: &Path, pre_include: &[&Path]) -> Result<()> {
    let (cmd, clang) = half_command(src, opts, half, out, pre_include)?;
    run_clang(cmd, &clang, src, opts)
}

/// The clang command of [`compile_half`], and the clang it runs.
fn half_command(
    src: &Path,
    opts: &ClangOptions,
    half: Half,
    out: &Path,
    pre_include: &[&Path],
) -> Result<(Command, std::path::PathBuf)> {
    let cuda =
        hpvm_core::toolchain::cuda_path().filter(|p| p.join("include/cuda_runtime.h").is_file()).ok_or_else(|| {
            Error::Cuda(format!(
                "{}: CUDA sources need CUDA's headers: run scripts/bootstrap, or set HPVM_MGPU_CUDA_PATH",
                src.display()
            ))
        })?;
    let sdk = hpvm_core::toolchain::CUDA_VERSION.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    let clang = clang();
    let mut cmd = Command::new(&clang);
    cmd.args(["-x", "cuda"]).arg(format!("--cuda-path={}", cuda.display()));
    cmd.arg(format!("--cuda-gpu-arch={}", opts.cuda_arch.as_deref().unwrap_or(DEFAULT_ARCH)));
    // Without libdevice the driver does not tell the compiler CUDA's version, and the headers
    // fall back to the launch API of CUDA 9 (`cudaConfigureCall`).
    cmd.args(["-Wno-unknown-cuda-version", "-nocudalib", "-Xclang"]).arg(format!("-target-sdk-version={sdk}"));
    cmd.arg(match half {
        Half::Device => "--cuda-device-only",
        Half::Host => "--cuda-host-only",
    });
    cmd.args(GCC_LENIENT_CXX);
    // CCCL 12.9 (Thrust, CUB, libcu++) indexes type packs with C++26's `Ts...[I]` wherever
    // clang announces it, except for clang 19.0 and older: clang 19.1 announces it and then
    // rejects CCCL's use ("invalid index 1 for pack of size 1"). Its fallback is plain C++17.
    cmd.args(["-Wno-builtin-macro-redefined", "-U__cpp_pack_indexing"]);
    add_user_flags(&mut cmd, opts);
    if opts.openmp && half == Half::Host {
        cmd.arg("-fopenmp");
    }
    if opts.no_fmad && half == Half::Device {
        cmd.arg("-ffp-contract=off");
    }
    if half == Half::Host {
        cmd.args(GCC_FOLDS_MATH);
    }
    for header in pre_include {
        cmd.arg("-include").arg(header);
    }
    add_ir_flags(&mut cmd, opts);
    cmd.arg(if half == Half::Device { "-S" } else { "-c" });
    cmd.arg(src).arg("-o").arg(out);
    Ok((cmd, clang))
}

/// `e` naming the user's source `path` rather than the copy compiled in its place.
fn named(e: Error, path: &Path) -> Error {
    match e {
        Error::CompileFailed { .. } => Error::CompileFailed { file: path.display().to_string() },
        e => e,
    }
}

/// Where clang's messages `said` that a `__shared__` variable of `file` may not be
/// initialized: (line, column) of each variable's name.
fn shared_with_constructors(said: &str, file: &str) -> Vec<(usize, usize)> {
    const REFUSED: &str = ": error: initialization is not supported for __shared__ variables";
    said.lines()
        .filter_map(|l| {
            let at = l.strip_suffix(REFUSED)?.strip_prefix(file)?.strip_prefix(':')?;
            let (line, col) = at.split_once(':')?;
            Some((line.parse().ok()?, col.parse().ok()?))
        })
        .collect()
}

/// `text` with each `__shared__` variable named at (line, column) of `at` declared as
/// storage of its type's size and alignment, and the name a reference to it, on the same
/// lines: nvcc takes a `__shared__` object whose constructor does something (libcu++'s
/// `cuda::barrier`, a struct with member initializers) and does not run the constructor,
/// which the program replaces (`init(&bar, n)`, a placement `new`, an assignment by one
/// thread); clang refuses it. The object is then what nvcc's is: uninitialized shared memory
/// of its type. `None` where a declaration is not the plain form (`__shared__ T name;` or
/// `__shared__ T name[N]...;`, `static` allowed): an initializer, several names, attributes.
fn unconstructed_shared(text: &str, at: &[(usize, usize)]) -> Option<String> {
    let line_starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // (start, end, replacement), one per declaration.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for &(line, col) in at {
        let name_at = line_starts.get(line.checked_sub(1)?)? + col.checked_sub(1)?;
        let name_end = name_at + b.get(name_at..)?.iter().take_while(|&&c| word(c)).count();
        let name = &text[name_at..name_end];
        if name.is_empty() || edits.iter().any(|e| e.0 <= name_at && name_at < e.1) {
            continue;
        }
        // The statement: from after the last `;`, `{` or `}` before the name (comments and
        // preprocessor lines skipped) to the `;` after it.
        let before = text[..name_at].rfind([';', '{', '}']).map_or(0, |i| i + 1);
        let start = skip_blanks(text, before);
        let end = name_end + text[name_end..].find(';')?;
        let suffix = text[name_end..end].trim();
        let arrays = suffix.is_empty() || (suffix.starts_with('[') && suffix.ends_with(']') && !suffix.contains('='));
        let decl = &text[start..name_at];
        let words: Vec<&str> = decl.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
        let plain =
            !["alignas", "__align__", "__attribute__", "extern", "__declspec"].iter().any(|w| words.contains(w))
                && !decl.contains(['=', ',', ';', '#', '/']);
        if !arrays || !plain || !words.contains(&"__shared__") {
            return None;
        }
        let ty = decl
            .split_inclusive(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map(|piece| {
                let w = piece.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
                if w == "__shared__" || w == "static" {
                    &piece[w.len()..]
                } else {
                    piece
                }
            })
            .collect::<String>();
        let ty = ty.trim();
        if ty.is_empty() {
            return None;
        }
        let t = format!("__hpvm_shared_{name}_t");
        let storage = format!("__hpvm_shared_{name}");
        let lines = text[start..=end].matches('\n').count();
        edits.push((
            start,
            end + 1,
            format!(
                "typedef {ty} {t}{suffix}; alignas({t}) __shared__ unsigned char {storage}[sizeof({t})]; \
                 {t} &{name} = *reinterpret_cast<{t} *>({storage});{}",
                "\n".repeat(lines)
            ),
        ));
    }
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(text.len() + 200 * edits.len());
    let mut from = 0;
    for (start, end, with) in edits {
        out.push_str(&text[from..start]);
        out.push_str(&with);
        from = end;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// The first byte at or after `i` that is not whitespace, a comment or a preprocessor line.
fn skip_blanks(text: &str, mut i: usize) -> usize {
    loop {
        let rest = &text[i..];
        let trimmed = rest.trim_start();
        i += rest.len() - trimmed.len();
        let skip = if trimmed.starts_with("//") || trimmed.starts_with('#') {
            trimmed.find('\n').map_or(trimmed.len(), |n| n + 1)
        } else if trimmed.starts_with("/*") {
            trimmed.find("*/").map_or(trimmed.len(), |n| n + 2)
        } else {
            return i;
        };
        i += skip;
    }
}

#[cfg(test)]
mod tests {
    use super::{respell_alignas, respell_asm, respell_launches, shared_with_constructors, unconstructed_shared};

    #[test]
    fn shared_objects_clang_refuses_are_found_in_its_messages() {
        let said = "k.cu:93:56: error: initialization is not supported for __shared__ variables\n   93 | x\n\
                    other.h:4:9: error: initialization is not supported for __shared__ variables\n\
                    k.cu:7:1: error: something else\n";
        assert_eq!(shared_with_constructors(said, "k.cu"), vec![(93, 56)]);
    }

    #[test]
    fn shared_objects_become_storage_and_a_reference_on_the_same_lines() {
        let text = "__global__ void k() {\n  __shared__ cuda::barrier<cuda::thread_scope_block> bar;\n  use(bar);\n}\n";
        let got = unconstructed_shared(text, &[(2, 54)]).unwrap();
        assert_eq!(
            got,
            "__global__ void k() {\n  typedef cuda::barrier<cuda::thread_scope_block> __hpvm_shared_bar_t; \
             alignas(__hpvm_shared_bar_t) __shared__ unsigned char __hpvm_shared_bar[sizeof(__hpvm_shared_bar_t)]; \
             __hpvm_shared_bar_t &bar = *reinterpret_cast<__hpvm_shared_bar_t *>(__hpvm_shared_bar);\n  use(bar);\n}\n"
        );
        // Arrays keep their extents in the type; `static`, comments and line breaks go, and
        // the lines after stay where they were.
        let text = "{ // c\n  static __shared__ S\n    s[2][3];\n}";
        let got = unconstructed_shared(text, &[(3, 5)]).unwrap();
        assert!(got.starts_with("{ // c\n  typedef S __hpvm_shared_s_t[2][3]; "), "{got}");
        assert_eq!(got.lines().count(), text.lines().count());
        // Not the plain form: left to clang's message.
        for (text, at) in [
            ("{ __shared__ S s = S(); }", (1, 16)),
            ("{ __shared__ S a, s; }", (1, 19)),
            ("{ __shared__ __align__(16) S s; }", (1, 30)),
            ("{ extern __shared__ S s[]; }", (1, 23)),
        ] {
            assert_eq!(unconstructed_shared(text, &[at]), None, "{text}");
        }
    }

    #[test]
    fn alignment_after_a_memory_space_is_moved_before_it_and_nothing_else() {
        assert_eq!(
            respell_alignas("  __shared__ alignas(alignof(float4)) float As[4][B][B];\n").as_deref(),
            Some("  alignas(alignof(float4)) __shared__ float As[4][B][B];\n")
        );
        assert_eq!(
            respell_alignas("static __device__  alignas (16) int x; __constant__ alignas(8) char c[3];").as_deref(),
            Some("static alignas (16) __device__ int x; alignas(8) __constant__ char c[3];")
        );
        for text in ["alignas(16) __shared__ float a[4];", "struct alignas(16) S {};", "__shared__ float alignas_x;"] {
            assert_eq!(respell_alignas(text), None, "{text}");
        }
    }

    #[test]
    fn register_names_in_extended_asm_are_respelled_and_nothing_else() {
        assert_eq!(
            respell_asm("asm volatile(\"mov.u64 %0, %globaltimer;\" : \"=l\"(t));").as_deref(),
            Some("asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));")
        );
        assert_eq!(
            respell_asm(
                "asm(\"{\\n\"\n  \"mov.u32 %0, %lanemask_lt; mov.u32 %1, %clock64;\"\n : \"=r\"(m), \"=r\"(c));"
            )
            .as_deref(),
            Some("asm(\"{\\n\"\n  \"mov.u32 %0, %%lanemask_lt; mov.u32 %1, %%clock64;\"\n : \"=r\"(m), \"=r\"(c));")
        );
        for text in [
            "asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(x));",
            "asm(\"movl %k1, %0\" : \"=r\"(x) : \"r\"(y));",
            "asm(\"add %[a], %[b]\" : [a] \"+r\"(x) : [b] \"r\"(y));",
            "asm(\" rdtsc; shl $0x20,%rdx; or %rdx,%rax; \");",
            "int plasma = 3; // \"%x\" : ",
            "printf(\"%d %s\", a, b) ? x : y;",
        ] {
            assert_eq!(respell_asm(text), None, "{text}");
        }
    }

    #[test]
    fn launches_with_spaces_are_respelled_and_nothing_else() {
        assert_eq!(respell_launches("k<< <g, b>> >(a);\n").as_deref(), Some("k<<<g, b>>>(a);\n"));
        assert_eq!(respell_launches("k<<  <g, b, 0, s>>\t>(a);").as_deref(), Some("k<<<g, b, 0, s>>>(a);"));
        // A closer on another line is left as it is (clang then says where).
        assert_eq!(respell_launches("k<< <g,\n b>> >(a);").as_deref(), Some("k<<<g,\n b>> >(a);"));
        for text in ["k<<<g, b>>>(a);", "x << y;", "v<w<int> > x; a >> > b;", "a <<<< b"] {
            assert_eq!(respell_launches(text), None, "{text}");
        }
    }
}
