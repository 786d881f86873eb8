//! Source locations, as the user wrote them (from the IR's debug info).

use std::fmt;

/// A `file:line:column` position in the user's source. `line`/`column` are 1-based; a
/// column of 0 means the debug info gave none.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SrcLoc {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for SrcLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.column == 0 {
            write!(f, "{}:{}", self.file, self.line)
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        }
    }
}

/// Renders an optional location; IR without debug info has none.
pub fn show(loc: &Option<SrcLoc>) -> String {
    loc.as_ref().map_or_else(|| "<unknown location>".to_string(), |l| l.to_string())
}

/// Whether `file` is one of the compiler's or the system's headers rather than the user's:
/// clang's resource headers (its CUDA wrappers among them), the CUDA folder's, `/usr/include`.
pub fn is_system_header(file: &str) -> bool {
    let cuda = crate::toolchain::cuda_path();
    // hpvm-mgpu's own headers, force-included from a temporary folder (`cuda/*.h`).
    let ours = std::path::Path::new(file).file_name().is_some_and(|n| n.to_string_lossy().starts_with("hpvm_"))
        && file.contains("hpvm-mgpu-cuda-");
    ours || file.contains("/lib/clang/")
        || file.starts_with("/usr/include/")
        || cuda.is_some_and(|c| std::path::Path::new(file).starts_with(c))
}

/// The location of an instruction as the user should read it (see [`crate::ir`]'s `loc`).
///
/// # Safety
/// `inst` is an instruction of a live module.
pub unsafe fn of_instruction(inst: llvm_sys::prelude::LLVMValueRef) -> Option<SrcLoc> {
    crate::ir::Val(inst).loc()
}

#[cfg(test)]
mod tests {
    #[test]
    fn headers_of_the_compiler_are_not_the_users() {
        assert!(super::is_system_header("/usr/lib/llvm-19/lib/clang/19/include/__clang_cuda_math.h"));
        assert!(super::is_system_header("/usr/include/stdio.h"));
        assert!(super::is_system_header("/tmp/hpvm-mgpu-build-1-2-0/hpvm-mgpu-cuda-3-4-1/hpvm_textures.h"));
        assert!(!super::is_system_header("/home/me/hpvm_textures.h"));
        assert!(!super::is_system_header("/home/me/app/kernels.cu"));
        assert!(!super::is_system_header("kernels.cu"));
    }
}
