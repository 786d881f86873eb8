//! Polly's view of a function: its SCoPs' statement domains, arrays (delinearized, with their
//! dimension sizes) and access relations, as ISL text.
//!
//! The function should be in the shape Polly analyses best (DESIGN.md): `-O0` code without
//! optnone, then `sroa,early-cse,loop-simplify,loop-rotate,indvars`, which keeps `a && b`
//! guards as branches (at `-O1` they become selects, which Polly treats as non-affine).

use crate::{Error, Result};
use inkwell::module::Module;
use std::ffi::{c_char, CStr, CString};

extern "C" {
    fn hpvm_polly_analyze(
        module: llvm_sys::prelude::LLVMModuleRef,
        function: *const c_char,
        careful: std::ffi::c_int,
    ) -> *mut c_char;
    fn hpvm_polly_free(text: *mut c_char);
}

/// One array of a SCoP: element size and the size of each dimension (`None`: the outermost,
/// unknown extent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Array {
    pub name: String,
    /// The LLVM name of the base pointer (a parameter of the analysed function), `?` if none.
    pub base: String,
    pub element_size: u32,
    /// The LLVM type of an element (`float`, `i32`, `ptr`).
    pub element_type: String,
    pub sizes: Vec<Option<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Read,
    MustWrite,
    MayWrite,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub statement: String,
    pub kind: AccessKind,
    pub affine: bool,
    /// `[params] -> { Stmt[i...] -> Array[e...] }`
    pub relation: String,
    /// `file:line` of the access, `?` without debug info.
    pub location: String,
    /// A read in a loop the shim let run to the end of its affine range (a search that may
    /// exit early): the relation is a superset of what it reads.
    pub approximate: bool,
    /// A read under a thread test loosened to hold for every thread of the block
    /// ([`crate::loosen`]): the relation is a superset of what the block reads.
    pub loosened: bool,
    /// For a write at a data-dependent index: the load in the same statement its index is,
    /// when Polly models that load exactly.
    pub through: Option<Through>,
    /// For a write at a data-dependent index: the index is a value loaded at a place Polly
    /// models, but not affinely (it multiplies run-time values), so that with a launch's values
    /// built in the write may have a [`Self::through`].
    pub through_later: bool,
    /// A non-affine write whose index is computed from a loaded value (else it is beyond
    /// affine arithmetic for another reason: a product of parameters, a non-affine loop).
    pub data_dependent: bool,
    /// The parameters for which the relation's subscripts stay within the array's inner
    /// extents, so that it names the elements really accessed (`bounds.rs`); `None` until
    /// computed, and for arrays of one dimension (nothing to stay within).
    pub in_bounds: Option<String>,
}

/// A parameter Polly made of a product of plain parameters (`p_5` for `(-r) * (1 + w)`),
/// expanded: `value = sum of coefficient × names` wherever `conds` hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compound {
    pub name: String,
    /// (coefficient, parameter names multiplied; empty for the constant term).
    pub terms: Vec<(i64, Vec<String>)>,
    /// ISL constraints over plain parameters (the narrow arithmetic does not wrap).
    pub conds: Vec<String>,
}

/// How a write's element index comes from a loaded value: element `(value + offset)` of
/// `scale` bytes from the array's base, `value` the integer loaded by the read `relation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Through {
    /// `[params] -> { Stmt[i...] -> IndexArray[e...] }`, exact.
    pub relation: String,
    /// The loaded integer's width, and whether it is sign-extended (else zero-extended or
    /// already 64 bits wide).
    pub bits: u32,
    pub signed: bool,
    pub scale: u32,
    pub offset: i64,
}

/// A statement: its iteration domain and what its dimensions are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub name: String,
    /// `[params] -> { Stmt[i...] : ... }`
    pub domain: String,
    /// The header block name of the loop of each dimension, outermost first.
    pub loops: Vec<String>,
    /// A non-affine region folded into one statement: its accesses may or may not happen.
    pub region: bool,
}

/// A memory access outside every SCoP: Polly says nothing about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmodeled {
    /// `read`, `write` or `call`.
    pub kind: String,
    /// The name of the object the address is based on, `?` if unknown.
    pub base: String,
    pub why: Unmodelable,
    pub location: String,
}

/// Why Polly could not model an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmodelable {
    /// An atomic update (`__hpvm__atomic_*`).
    Atomic,
    /// The address depends on a value loaded from memory.
    DataDependent,
    /// Anything else: a non-affine index, control flow Polly cannot model.
    Shape,
}

/// What Polly found in a function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scops {
    /// Each SCoP's parameter context.
    pub contexts: Vec<String>,
    /// Each SCoP's assumed context: the model holds only for parameters in it...
    pub assumed: Vec<String>,
    /// ... and outside its invalid context.
    pub invalid: Vec<String>,
    pub compound: Vec<Compound>,
    /// Products of known parameters renamed as parameters of their own (name, factors):
    /// [`crate::products`].
    pub products: Vec<(String, Vec<String>)>,
    pub arrays: Vec<Array>,
    pub statements: Vec<Statement>,
    pub accesses: Vec<Access>,
    pub unmodeled: Vec<Unmodeled>,
}

/// Runs Polly's ScopInfo on `function` of `module`. `careful` (after Polly aborted on it,
/// [`crate::Options::careful`]): its loops go as written, without the preparation that gives
/// a loop of several exits one, after which Polly 19's affinator aborted on a value of one
/// loop used after it.
pub fn analyze(module: &Module<'_>, function: &str, careful: bool) -> Result<Scops> {
    let name = CString::new(function).map_err(|e| Error::Polly(e.to_string()))?;
    // SAFETY: the module is alive for the call; the shim returns malloc'ed text we free.
    let text = unsafe {
        let p = hpvm_polly_analyze(module.as_mut_ptr(), name.as_ptr(), careful.into());
        if p.is_null() {
            return Err(Error::Polly("out of memory".into()));
        }
        let s = CStr::from_ptr(p).to_string_lossy().into_owned();
        hpvm_polly_free(p);
        s
    };
    // For whoever works on the analysis: what Polly said, before it is read (to standard
    // error, or appended to the file named, which also reaches into the runtime's
    // `hpvm-mgpu specialize` processes).
    if let Some(to) = std::env::var_os("HPVM_MGPU_DUMP_POLLY") {
        let said = format!("polly: {function}\n{text}\n");
        let file = std::path::Path::new(&to);
        match std::fs::OpenOptions::new().append(true).open(file) {
            Ok(mut f) if file.is_absolute() => {
                let _ = std::io::Write::write_all(&mut f, said.as_bytes());
            }
            _ => eprint!("{said}"),
        }
    }
    parse(&text)
}

fn parse(text: &str) -> Result<Scops> {
    let mut s = Scops::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["error", msg] => return Err(Error::Polly(msg.to_string())),
            ["scop", _, ctx] => s.contexts.push(ctx.to_string()),
            ["array", name, base, size, ty, dims @ ..] => s.arrays.push(Array {
                name: name.to_string(),
                base: base.to_string(),
                element_size: size.parse().map_err(|_| Error::Polly(format!("bad array line: {line}")))?,
                element_type: ty.to_string(),
                sizes: dims.iter().map(|d| (*d != "*").then(|| d.to_string())).collect(),
            }),
            ["assumed", ctx] => s.assumed.push(ctx.to_string()),
            ["invalid", ctx] => s.invalid.push(ctx.to_string()),
            ["domain", stmt, dom, loops, kind] => s.statements.push(Statement {
                name: stmt.to_string(),
                domain: dom.to_string(),
                loops: if *loops == "-" { vec![] } else { loops.split(',').map(str::to_string).collect() },
                region: *kind == "region",
            }),
            ["outside", kind, base, why, loc] => s.unmodeled.push(Unmodeled {
                kind: kind.to_string(),
                base: base.to_string(),
                why: match *why {
                    "atomic" => Unmodelable::Atomic,
                    "data" => Unmodelable::DataDependent,
                    _ => Unmodelable::Shape,
                },
                location: loc.to_string(),
            }),
            ["access", stmt, kind, affine, rel, loc] => s.accesses.push(Access {
                statement: stmt.to_string(),
                approximate: *kind == "approx-read",
                loosened: *kind == "loosened-read",
                kind: match *kind {
                    "read" | "approx-read" | "loosened-read" => AccessKind::Read,
                    "must-write" => AccessKind::MustWrite,
                    _ => AccessKind::MayWrite,
                },
                affine: *affine == "affine",
                relation: rel.to_string(),
                location: loc.to_string(),
                through: None,
                through_later: false,
                data_dependent: false,
                in_bounds: None,
            }),
            ["param", name, poly, conds] => {
                let bad = || Error::Polly(format!("bad param line: {line}"));
                let mut terms = Vec::new();
                for t in poly.split(" + ").filter(|t| *t != "0") {
                    let mut f = t.split('*');
                    let c: i64 = f.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
                    terms.push((c, f.map(str::to_string).collect()));
                }
                let conds = if *conds == "-" { vec![] } else { conds.split(';').map(str::to_string).collect() };
                s.compound.push(Compound { name: name.to_string(), terms, conds });
            }
            ["index", why] => {
                let bad = || Error::Polly(format!("bad index line: {line}"));
                s.accesses.last_mut().ok_or_else(bad)?.data_dependent = *why == "data";
            }
            ["through", rel, ext, bits, scale, offset] => {
                let bad = || Error::Polly(format!("bad through line: {line}"));
                let t = Through {
                    relation: rel.to_string(),
                    bits: bits.parse().map_err(|_| bad())?,
                    // A GEP index of any width is sign-extended.
                    signed: *ext != "zext",
                    scale: scale.parse().map_err(|_| bad())?,
                    offset: offset.parse().map_err(|_| bad())?,
                };
                s.accesses.last_mut().ok_or_else(bad)?.through = Some(t);
            }
            ["through-later"] => {
                let bad = || Error::Polly(format!("bad through line: {line}"));
                s.accesses.last_mut().ok_or_else(bad)?.through_later = true;
            }
            _ => return Err(Error::Polly(format!("unexpected line from the shim: {line}"))),
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;

    /// A naive matrix product over instance loops, as the loop-wrapping pass will produce it,
    /// prepared as DESIGN.md says (IR from `clang -O0 -Xclang -disable-O0-optnone`, then
    /// sroa,early-cse,loop-simplify,loop-rotate,indvars).
    fn matmul_module(ctx: &Context) -> Module<'_> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hpvm-mgpu-polly-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("k.c");
        std::fs::write(
            &src,
            "void wrapped(float *A, float *B, float *C, long N) {\n\
               for (long y = 0; y < N; ++y)\n\
                 for (long x = 0; x < N; ++x)\n\
                   if (x < N && y < N) {\n\
                     float acc = 0;\n\
                     for (long k = 0; k < N; ++k) acc += A[y * N + k] * B[k * N + x];\n\
                     C[y * N + x] = acc;\n\
                   }\n\
             }\n",
        )
        .unwrap();
        let ll = dir.join("k.ll");
        let clang = std::env::var("LLVM_SYS_191_PREFIX").map_or("/usr/lib/llvm-19".into(), |p| p) + "/bin/clang";
        let ok = std::process::Command::new(clang)
            .args(["-O0", "-Xclang", "-disable-O0-optnone", "-fno-discard-value-names", "-S", "-emit-llvm"])
            .arg(&src)
            .arg("-o")
            .arg(&ll)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_file(&ll).unwrap();
        let m = ctx.create_module_from_ir(buf).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        inkwell::targets::Target::initialize_native(&Default::default()).unwrap();
        let triple = inkwell::targets::TargetMachine::get_default_triple();
        let tm = inkwell::targets::Target::from_triple(&triple)
            .unwrap()
            .create_target_machine(
                &triple,
                "generic",
                "",
                inkwell::OptimizationLevel::None,
                Default::default(),
                Default::default(),
            )
            .unwrap();
        m.run_passes(
            "function(sroa,early-cse,loop-simplify,loop-rotate,indvars)",
            &tm,
            inkwell::passes::PassBuilderOptions::create(),
        )
        .unwrap();
        m
    }

    #[test]
    fn polly_sees_delinearized_exact_accesses() {
        let ctx = Context::create();
        let m = matmul_module(&ctx);
        let s = analyze(&m, "wrapped", false).unwrap();
        // A[y][k], B[k][x] read; C[y][x] written, all affine and delinearized to 2-D arrays
        // whose inner extent is the parameter N.
        let reads: Vec<&Access> = s.accesses.iter().filter(|a| a.kind == AccessKind::Read).collect();
        let writes: Vec<&Access> = s.accesses.iter().filter(|a| a.kind == AccessKind::MustWrite).collect();
        assert_eq!(reads.len(), 2, "{s:#?}");
        assert_eq!(writes.len(), 1, "{s:#?}");
        assert!(s.accesses.iter().all(|a| a.affine));
        assert!(reads.iter().any(|a| a.relation.contains("[i0, i2]")), "{s:#?}");
        assert!(reads.iter().any(|a| a.relation.contains("[i2, i1]")), "{s:#?}");
        assert!(writes[0].relation.contains("[i0, i1]"), "{s:#?}");
        let two_d: Vec<&Array> = s.arrays.iter().filter(|a| a.sizes.len() == 2).collect();
        assert_eq!(two_d.len(), 3, "{s:#?}");
        assert!(two_d.iter().all(|a| a.sizes[0].is_none() && a.element_size == 4));
        // LLVM names: arrays by their base pointer, parameters by the argument.
        let mut bases: Vec<&str> = two_d.iter().map(|a| a.base.as_str()).collect();
        bases.sort();
        assert_eq!(bases, ["A", "B", "C"]);
        assert!(s.contexts[0].starts_with("[N] ->"), "{:?}", s.contexts);
        assert!(two_d.iter().all(|a| a.sizes[1].as_deref().is_some_and(|d| d.contains("(N)"))), "{s:#?}");
    }

    #[test]
    fn statements_name_their_loops() {
        let ctx = Context::create();
        let m = matmul_module(&ctx);
        let s = analyze(&m, "wrapped", false).unwrap();
        assert!(s.unmodeled.is_empty(), "{s:#?}");
        assert!(s.statements.iter().all(|st| st.loops.len() >= 2 && !st.region), "{s:#?}");
        assert_eq!(s.assumed.len(), 1);
    }

    /// Analyses from several threads at once (the test harness and `build` both do this): the
    /// first call sets Polly's options, and two threads doing so together once aborted CI with
    /// LLVM's "Option 'h' registered more than once".
    #[test]
    fn concurrent_first_analyses() {
        let barrier = std::sync::Barrier::new(4);
        let results: Vec<String> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let ctx = Context::create();
                        let m = matmul_module(&ctx);
                        barrier.wait();
                        format!("{:#?}", analyze(&m, "wrapped", false).unwrap())
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(results.iter().all(|r| r == &results[0]), "{results:#?}");
        assert_eq!(results[0].matches("MustWrite").count(), 1, "{}", results[0]);
    }

    #[test]
    fn unknown_function_is_an_error() {
        let ctx = Context::create();
        let m = matmul_module(&ctx);
        assert!(matches!(analyze(&m, "nope", false), Err(Error::Polly(msg)) if msg.contains("no function nope")));
    }
}
