//! Names as users read them: node functions of C++ programs are mangled symbols
//! (`_Z9mysgemmNTPfmiS_miS_miiff`); every message, report and dump shows the demangled
//! function name (`mysgemmNT`), qualified but without its parameter list. Symbols stay the
//! identities (databases, kernels, entry points key on them); only text for people changes.

/// The name a person knows `symbol` by: the demangled name without parameters for an
/// Itanium-mangled C++ symbol, `symbol` itself otherwise (C functions, or anything the
/// demangler does not understand, so no name is ever lost).
pub fn display_name(symbol: &str) -> String {
    if !symbol.starts_with("_Z") {
        return symbol.to_string();
    }
    // Nodes made around a CUDA kernel: `<kernel symbol>.root`, `.blocks`, `.alloc`.
    if let Some((head, tail)) = symbol.split_once('.').filter(|(_, t)| ["root", "blocks", "alloc"].contains(t)) {
        return format!("{}.{tail}", display_name(head));
    }
    let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    cpp_demangle::Symbol::new(symbol)
        .ok()
        .and_then(|s| s.demangle_with_options(&options).ok())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| symbol.to_string())
}

/// The name a person knows a kernel's parameter by: the source's. Clang names the pieces of
/// a struct passed by value after the parameter and the field's position (`out.0.0.0` for a
/// pointer inside CUB's `out` iterator), a name no source has (a C identifier holds no `.`):
/// those read as the parameter they came from.
pub fn param_name(name: &str) -> &str {
    let mut base = name;
    while let Some((head, tail)) = base.rsplit_once('.') {
        if head.is_empty() || tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        base = head;
    }
    base
}

/// Whether `given` (what a user typed, e.g. in `--split NODE=y`) names the node `symbol`:
/// its symbol or its display name.
pub fn names(given: &str, symbol: &str) -> bool {
    given == symbol || given == display_name(symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_of_struct_parameters_read_as_the_parameter() {
        assert_eq!(param_name("out.0.0.0.0.0"), "out");
        assert_eq!(param_name("d_keys_out.0.0.0"), "d_keys_out");
        assert_eq!(param_name("f.0"), "f");
        // Source names stay as they are.
        assert_eq!(param_name("a"), "a");
        assert_eq!(param_name("x1"), "x1");
        assert_eq!(param_name(".0"), ".0");
        assert_eq!(param_name("v.x"), "v.x");
    }

    #[test]
    fn cxx_symbols_lose_mangling_and_parameters() {
        assert_eq!(display_name("_Z9mysgemmNTPfmiS_miS_miiff"), "mysgemmNT");
        assert_eq!(display_name("_Z27performStreamCollide_kernelPfmS_m"), "performStreamCollide_kernel");
        assert_eq!(display_name("_ZN5stage4blurEPfm"), "stage::blur");
        assert_eq!(display_name("_ZN12_GLOBAL__N_14leafEPfm"), "(anonymous namespace)::leaf");
        assert_eq!(display_name("_Z5scaleIfEvPT_S0_i.root"), "scale<float>.root");
        assert_eq!(display_name("_Z4tilePfi.blocks"), "tile.blocks");
    }

    #[test]
    fn c_names_and_garbage_pass_through() {
        assert_eq!(display_name("VecAdd"), "VecAdd");
        assert_eq!(display_name("_Zgarbage"), "_Zgarbage");
        assert!(names("mysgemmNT", "_Z9mysgemmNTPfmiS_miS_miiff"));
        assert!(names("_Z9mysgemmNTPfmiS_miS_miiff", "_Z9mysgemmNTPfmiS_miS_miiff"));
        assert!(!names("other", "_Z9mysgemmNTPfmiS_miS_miiff"));
    }
}
