//! CUDA's libraries beside its runtime (cuBLAS, cuSPARSE, cuFFT, cuRAND's host API...),
//! which hpvm-mgpu does not provide yet: a program that uses one fails at build with one
//! message naming the library and where the program reaches it, not with a missing header
//! or an undefined symbol alone.

use std::path::Path;

/// A library: its name for the user, the prefix of its functions, and of its headers.
struct Library {
    name: &'static str,
    symbols: &'static str,
    headers: &'static [&'static str],
}

/// cuRAND's device API (`curand_kernel.h`, header-only) builds; its host API (`curand.h`,
/// `curandCreateGenerator`...) needs the library.
const LIBRARIES: &[Library] = &[
    Library { name: "cuBLAS", symbols: "cublas", headers: &["cublas"] },
    Library { name: "cuSPARSE", symbols: "cusparse", headers: &["cusparse"] },
    Library { name: "cuFFT", symbols: "cufft", headers: &["cufft"] },
    Library { name: "cuRAND's host API", symbols: "curand", headers: &["curand.h"] },
    Library { name: "cuSOLVER", symbols: "cusolver", headers: &["cusolver"] },
    Library { name: "cuDNN", symbols: "cudnn", headers: &["cudnn"] },
    Library { name: "cuTENSOR", symbols: "cutensor", headers: &["cutensor"] },
    Library { name: "NCCL", symbols: "nccl", headers: &["nccl.h"] },
    Library { name: "NVRTC", symbols: "nvrtc", headers: &["nvrtc.h"] },
    Library { name: "NPP", symbols: "npp", headers: &["npp"] },
    Library { name: "nvJPEG", symbols: "nvjpeg", headers: &["nvjpeg"] },
    Library { name: "NVML", symbols: "nvml", headers: &["nvml.h"] },
    // The driver API (`cuInit`, `cuMemAlloc`): last, after the libraries whose prefixes
    // start alike. Its header `cuda.h` also serves programs that only read its version
    // macros, so only a call is refused.
    Library { name: "the CUDA driver API", symbols: "cu", headers: &[] },
];

fn what(name: &str) -> String {
    format!("{name}, a CUDA library hpvm-mgpu does not provide yet (it provides the CUDA runtime API)")
}

/// The library whose function `symbol` is, if any: its prefix, then a capital, or one small
/// letter and a capital (NPP's `nppiFilter`, `nppsSum`).
fn library_of(symbol: &str) -> Option<&'static Library> {
    LIBRARIES.iter().find(|l| {
        symbol.strip_prefix(l.symbols).is_some_and(|rest| {
            let mut chars = rest.chars();
            match (chars.next(), chars.next()) {
                (Some(a), _) if a.is_ascii_uppercase() => true,
                (Some(a), Some(b)) => a.is_ascii_lowercase() && b.is_ascii_uppercase(),
                _ => false,
            }
        })
    })
}

/// For the linker's messages (GNU ld's form, `at: undefined reference to `f'`): one line per
/// library function the program calls, naming the library and the first place.
pub fn explain_undefined(messages: &str) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for line in messages.lines() {
        let Some((at, rest)) = line.split_once(": undefined reference to `") else { continue };
        let Some(symbol) = rest.strip_suffix('\'') else { continue };
        let Some(library) = library_of(symbol) else { continue };
        if seen.contains(&symbol) {
            continue;
        }
        seen.push(symbol);
        out.push_str(&format!("{at}: error: `{symbol}` is {}\n", what(library.name)));
    }
    out
}

/// The first `#include` of `source` that names a library's header the toolchain lacks, as
/// `file:line: error: ...`; `None` where there is none (or the file cannot be read: the
/// compiler then says why).
pub fn missing_header(source: &Path, include_dir: Option<&Path>) -> Option<String> {
    let text = std::fs::read_to_string(source).ok()?;
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix('#') else { continue };
        let Some(rest) = rest.trim_start().strip_prefix("include") else { continue };
        let rest = rest.trim_start();
        let Some(header) = rest.strip_prefix(['<', '"']).and_then(|h| h.split(['>', '"']).next()) else { continue };
        let file = header.rsplit('/').next().unwrap_or(header);
        let Some(library) = LIBRARIES.iter().find(|l| l.headers.iter().any(|h| file.starts_with(h))) else { continue };
        // A header the program carries itself (beside the source) is its own.
        let beside = source.parent().map(|d| d.join(header)).is_some_and(|p| p.is_file());
        let provided = include_dir.is_some_and(|d| d.join(header).is_file());
        if beside || provided {
            continue;
        }
        return Some(format!(
            "{}:{}: error: `{header}` is the header of {}",
            source.display(),
            n + 1,
            what(library.name)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_functions_are_named_with_their_library() {
        let ld = "b.cu:3: undefined reference to `cublasCreate_v2'\n\
                  b.cu:4: undefined reference to `cublasCreate_v2'\n\
                  b.cu:5: undefined reference to `curandCreateGenerator'\n\
                  b.cu:6: undefined reference to `my_function'\n\
                  b.cu:7: undefined reference to `nccl_helper'\n";
        assert_eq!(
            explain_undefined(ld),
            format!(
                "b.cu:3: error: `cublasCreate_v2` is {}\nb.cu:5: error: `curandCreateGenerator` is {}\n",
                what("cuBLAS"),
                what("cuRAND's host API")
            )
        );
        // Device-side cuRAND (`curand_init` in device code) never reaches the linker; a name
        // that merely starts alike is not a library's.
        assert!(library_of("cublasfoo").is_none());
        assert_eq!(library_of("cusparseCreate").map(|l| l.name), Some("cuSPARSE"));
        assert_eq!(library_of("cuMemAlloc_v2").map(|l| l.name), Some("the CUDA driver API"));
        assert_eq!(library_of("cudaMalloc").map(|l| l.name), None);
        assert_eq!(library_of("cublasSgemm_v2").map(|l| l.name), Some("cuBLAS"));
        assert_eq!(library_of("nppiFilter_8u_C1R").map(|l| l.name), Some("NPP"));
    }

    #[test]
    fn includes_of_library_headers_are_found_by_line() {
        let dir = std::env::temp_dir().join(format!("hpvm-libraries-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("a.cu");
        std::fs::write(&src, "#include <cstdio>\n  #  include <cublas_v2.h>\n#include \"cufft.h\"\n").unwrap();
        let got = missing_header(&src, None).unwrap();
        assert_eq!(got, format!("{}:2: error: `cublas_v2.h` is the header of {}", src.display(), what("cuBLAS")));
        // The device API of cuRAND is not its host API; a header of the program's own is its own.
        std::fs::write(&src, "#include <curand_kernel.h>\n#include \"cublas_v2.h\"\n").unwrap();
        std::fs::write(dir.join("cublas_v2.h"), "").unwrap();
        assert_eq!(missing_header(&src, None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
