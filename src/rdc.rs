//! Relocatable device code (`--rdc`; nvcc's `-rdc=true` and `-dc`): a kernel may call a
//! `__device__` function, or use a `__device__` variable, that another CUDA file defines.
//!
//! A CUDA file compiled with `-c --rdc` becomes an object holding no code: one section,
//! [`SECTION`], carries the file's two halves as clang left them ([`Halves`]). The link reads
//! the halves of every such object and compiles them together as one source
//! ([`crate::build`]), so that device code is rewritten into graphs, analysed and lowered
//! with every function it calls, as nvcc's device link makes one program of the files.
//!
//! Invariants:
//! - an object either carries halves and nothing else, or is an ordinary object: the link
//!   never passes a carrier to the system linker;
//! - the halves are read back exactly as written ([`encode`] and [`decode`] are inverse).
//!
//! Such objects are linked by `hpvm-mgpu build` only, as nvcc's are by nvcc.

use crate::error::{Error, Result};
use frontend::cuda::Halves;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Linkage;
use inkwell::targets::{FileType, TargetMachine};
use std::path::Path;

/// The section of a carrier object that holds the halves.
pub const SECTION: &str = ".hpvm_rdc";

/// The first bytes of the section: what it holds, and in which layout.
const MAGIC: &[u8; 8] = b"HPVMRDC1";

/// The halves as bytes: [`MAGIC`], then the source's path, the device half and the host half,
/// each as its length (8 bytes, little-endian) and its bytes.
fn encode(h: &Halves) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for part in [h.source.as_bytes(), h.device.as_bytes(), &h.host] {
        out.extend((part.len() as u64).to_le_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// [`encode`]'s inverse; `None` for bytes it did not write.
fn decode(bytes: &[u8]) -> Option<Halves> {
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let mut part = || -> Option<&[u8]> {
        let (len, after) = rest.split_at_checked(8)?;
        let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
        let (part, after) = after.split_at_checked(len)?;
        rest = after;
        Some(part)
    };
    let source = String::from_utf8(part()?.to_vec()).ok()?;
    let device = String::from_utf8(part()?.to_vec()).ok()?;
    let host = part()?.to_vec();
    rest.is_empty().then_some(Halves { source, device, host })
}

/// Writes the carrier object of `halves` at `out`, for the machine `tm` compiles for.
pub fn write_object(halves: &Halves, out: &Path, tm: &TargetMachine) -> Result<()> {
    let ctx = Context::create();
    let module = ctx.create_module("hpvm_rdc");
    let bytes = encode(halves);
    let value = ctx.const_string(&bytes, false);
    let global = module.add_global(value.get_type(), None, "__hpvm_rdc_halves");
    global.set_initializer(&value);
    global.set_constant(true);
    global.set_section(Some(SECTION));
    global.set_linkage(Linkage::Internal);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    tm.write_to_file(&module, FileType::Object, out).map_err(|e| Error::Llvm(e.to_string()))
}

/// The halves a carrier object at `path` holds; `None` for any other file (an ordinary object,
/// an archive, a file that is no object), which the system linker takes as it is.
pub fn read_object(path: &Path) -> Option<Halves> {
    let buffer = MemoryBuffer::create_from_file(path).ok()?;
    let binary = buffer.create_binary_file(None).ok()?;
    // Sections are asked only of object files (an archive is no object file to LLVM's C API).
    use inkwell::object_file::LLVMBinaryType as T;
    let object = matches!(
        binary.get_binary_type(),
        T::LLVMBinaryTypeELF32L | T::LLVMBinaryTypeELF32B | T::LLVMBinaryTypeELF64L | T::LLVMBinaryTypeELF64B
    );
    if !object {
        return None;
    }
    let mut sections = binary.get_sections()?;
    while let Some(section) = sections.next_section() {
        if section.get_name().is_some_and(|n| n.to_bytes() == SECTION.as_bytes()) {
            return decode(section.get_contents());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halves() -> Halves {
        Halves { source: "src/a.cu".into(), device: "; device\n".into(), host: vec![0x42, 0x43, 0xc0, 0xde, 0] }
    }

    #[test]
    fn halves_read_back_as_written() {
        let h = halves();
        assert_eq!(decode(&encode(&h)), Some(h.clone()));
        let empty = Halves { source: String::new(), device: String::new(), host: Vec::new() };
        assert_eq!(decode(&encode(&empty)), Some(empty));
        // Anything else is not taken for halves: another layout, a cut or a longer section.
        let bytes = encode(&h);
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode(&[bytes.as_slice(), &[0]].concat()), None);
        assert_eq!(decode(b"HPVMRDC0"), None);
    }

    #[test]
    fn a_carrier_object_holds_the_halves_and_an_ordinary_one_none() {
        let dir = hpvm_core::scratch::ScratchDir::new("rdc-test").unwrap();
        let tm = crate::build::codegen_machine(0).unwrap();
        let carrier = dir.path().join("a.o");
        write_object(&halves(), &carrier, &tm).unwrap();
        assert_eq!(read_object(&carrier), Some(halves()));

        let ctx = Context::create();
        let module = ctx.create_module("plain");
        module.add_function("f", ctx.void_type().fn_type(&[], false), None);
        let plain = dir.path().join("b.o");
        tm.write_to_file(&module, FileType::Object, &plain).unwrap();
        assert_eq!(read_object(&plain), None);
        std::fs::write(dir.path().join("c.o"), b"not an object").unwrap();
        assert_eq!(read_object(&dir.path().join("c.o")), None);
        // An archive (here an empty one) is passed on to the system linker as it is.
        std::fs::write(dir.path().join("d.a"), b"!<arch>\n").unwrap();
        assert_eq!(read_object(&dir.path().join("d.a")), None);
    }
}
