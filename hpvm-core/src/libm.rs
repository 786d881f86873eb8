//! The C library's math functions, as the compiler's passes need to know them: pure (no
//! memory effects), and, for CUDA kernels, what libdevice's `__nv_*` functions stand for.

/// libm functions of one floating-point argument list and result; with an `f` suffix the
/// `float` versions. None reads or writes memory (`frexp`, `modf`, `sincos` are left out:
/// they store through a pointer).
pub const PURE: [&str; 49] = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "exp10",
    "exp2",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "hypot",
    "ilogb",
    "ldexp",
    "lgamma",
    "llrint",
    "llround",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "lrint",
    "lround",
    "nearbyint",
    "nextafter",
    "pow",
    "remainder",
    "rint",
    "round",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
];

/// libm functions that store a result through a pointer, which libdevice also has.
pub const STORING: [&str; 3] = ["frexp", "modf", "sincos"];

/// The base name of a libm function (`expf` → `exp`), if `name` is one of `names`.
fn base<'a>(name: &'a str, names: &[&str]) -> Option<&'a str> {
    let b = name.strip_suffix('f').filter(|b| names.contains(b)).unwrap_or(name);
    names.contains(&b).then_some(b)
}

/// Whether `name` is a pure libm function (double or float version); `trunc`/`truncf` too.
pub fn is_pure(name: &str) -> bool {
    name == "trunc" || name == "truncf" || base(name, &PURE).is_some()
}

/// The libm function libdevice's `nv` (`__nv_expf`) stands for, where libm has it.
pub fn of_libdevice(nv: &str) -> Option<&str> {
    let name = nv.strip_prefix("__nv_")?;
    (is_pure(name) || base(name, &STORING).is_some()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_and_double_versions_are_pure() {
        for f in ["expf", "exp", "log1pf", "atan2", "fmaxf", "truncf", "hypotf"] {
            assert!(is_pure(f), "{f}");
        }
        for f in ["frexpf", "modf", "printf", "f", "free", "expm"] {
            assert!(!is_pure(f), "{f}");
        }
    }

    #[test]
    fn libdevice_names_map_to_libm_where_it_has_them() {
        assert_eq!(of_libdevice("__nv_expf"), Some("expf"));
        assert_eq!(of_libdevice("__nv_exp"), Some("exp"));
        assert_eq!(of_libdevice("__nv_fabsf"), Some("fabsf"));
        assert_eq!(of_libdevice("__nv_sincosf"), Some("sincosf"));
        assert_eq!(of_libdevice("__nv_saturatef"), None);
        assert_eq!(of_libdevice("__nv_fast_expf"), None);
        assert_eq!(of_libdevice("__nv_min"), None);
        assert_eq!(of_libdevice("expf"), None);
    }
}
