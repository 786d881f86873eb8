//! The calls the CUDA frontend leaves in node code for what comes after it: each stands for
//! something only a GPU has (a warp operation, an inline PTX statement, device `printf`,
//! a libdevice function) and is given its code by each backend, the GPU one as PTX, the
//! CPU one as a call of the runtime. The analysis reads them too, so their names live here,
//! below both the frontend and the backends.

/// The prefix of the functions standing for warp operations (the frontend's `cuda::device::retarget_to_warp`).
pub const WARP_PREFIX: &str = "hpvm.warp.";

/// The prefix of the functions standing for inline PTX statements without portable code.
pub const ASM_PREFIX: &str = "hpvm.asm.";
/// The string attribute holding such a function's PTX text (LLVM's `$n` operand syntax).
pub const ASM_TEXT: &str = "hpvm-asm";
/// The string attribute holding its constraints; a trailing `!` marks side effects.
pub const ASM_CONSTRAINTS: &str = "hpvm-asm-constraints";

/// The string attribute of a leaf parameter that stands for a `__constant__` variable the
/// kernel only reads: `BYTES NAME`, the variable's size and its host shadow's name. The GPU
/// backend may read it from the GPU's constant bank instead ([`CONSTANT_BANK_PREFIX`]), where
/// the runtime places the variable's device copy.
pub const CONSTANT_PARAM: &str = "hpvm-constant";
/// The prefix of the GPU module's `.const` variable that holds a `__constant__` variable's
/// device copy: the prefix, then the host shadow's name.
pub const CONSTANT_BANK_PREFIX: &str = "hpvm_bank_";

/// The function standing for device `printf` (clang's `vprintf(format, arguments)`, the
/// arguments packed in a struct): on the CPU, the runtime's `hpvm_rt_device_printf`, which
/// reads that struct; the GPU backend gives it a call of the GPU's own `vprintf`. (libc's
/// `vprintf` takes a `va_list`: the call must never reach it.)
pub const PRINTF: &str = "hpvm.printf";

/// libdevice functions without a libm twin that the runtime implements for the CPU (the GPU
/// backend links libdevice's own).
pub const RUNTIME_NV: &[&str] = &[
    "__nv_min",
    "__nv_max",
    "__nv_umin",
    "__nv_umax",
    "__nv_llmin",
    "__nv_llmax",
    "__nv_ullmin",
    "__nv_ullmax",
    "__nv_abs",
    "__nv_llabs",
    "__nv_saturatef",
    "__nv_rsqrtf",
    "__nv_rsqrt",
    "__nv_fast_expf",
    "__nv_fast_exp10f",
    "__nv_fast_logf",
    "__nv_fast_log2f",
    "__nv_fast_log10f",
    "__nv_fast_powf",
    "__nv_fast_sinf",
    "__nv_fast_cosf",
    "__nv_fast_tanf",
    "__nv_fast_sincosf",
    "__nv_fast_fdividef",
    "__nv_umul24",
    "__nv_mul24",
    "__nv_umulhi",
    "__nv_mulhi",
    "__nv_umul64hi",
    "__nv_mul64hi",
    "__nv_hadd",
    "__nv_rhadd",
    "__nv_uhadd",
    "__nv_urhadd",
    "__nv_fadd_rn",
    "__nv_fsub_rn",
    "__nv_fmul_rn",
    "__nv_fdiv_rn",
    "__nv_dadd_rn",
    "__nv_dsub_rn",
    "__nv_dmul_rn",
    "__nv_ddiv_rn",
    "__nv_fdividef",
    "__nv_powi",
    "__nv_powif",
    "__nv_ffs",
    "__nv_popc",
    "__nv_clz",
    "__nv_brev",
    "__nv_brevll",
    "__nv_fsqrt_rn",
    "__nv_dsqrt_rn",
    "__nv_frcp_rn",
    "__nv_frsqrt_rn",
    "__nv_drcp_rn",
    "__nv_ffsll",
    "__nv_popcll",
    "__nv_clzll",
    "__nv_byte_perm",
    "__nv_sad",
    "__nv_usad",
    "__nv_fmaf_rn",
    "__nv_fma_rn",
    "__nv_float_as_int",
    "__nv_float_as_uint",
    "__nv_int_as_float",
    "__nv_uint_as_float",
    "__nv_double_as_longlong",
    "__nv_longlong_as_double",
    "__nv_isnanf",
    "__nv_isnand",
    "__nv_isinff",
    "__nv_isinfd",
    "__nv_finitef",
    "__nv_isfinited",
    "__nv_signbitf",
    "__nv_signbitd",
    "__nv_float2int_rn",
    "__nv_float2int_rz",
    "__nv_float2int_rd",
    "__nv_float2int_ru",
    "__nv_float2uint_rn",
    "__nv_float2uint_rz",
    "__nv_float2uint_rd",
    "__nv_float2uint_ru",
    "__nv_float2ll_rn",
    "__nv_float2ll_rz",
    "__nv_float2ll_rd",
    "__nv_float2ll_ru",
    "__nv_float2ull_rn",
    "__nv_float2ull_rz",
    "__nv_float2ull_rd",
    "__nv_float2ull_ru",
    "__nv_double2int_rn",
    "__nv_double2int_rz",
    "__nv_double2int_rd",
    "__nv_double2int_ru",
    "__nv_double2uint_rn",
    "__nv_double2uint_rz",
    "__nv_double2ll_rn",
    "__nv_double2ll_rz",
    "__nv_double2ll_rd",
    "__nv_double2ll_ru",
    "__nv_int2float_rn",
    "__nv_int2float_ru",
    "__nv_int2float_rd",
    "__nv_int2float_rz",
    "__nv_uint2float_rn",
    "__nv_uint2float_ru",
    "__nv_uint2float_rd",
    "__nv_uint2float_rz",
];

/// Whether `name` is a libdevice function the runtime implements for the CPU that computes on
/// its arguments' values alone (every one of [`RUNTIME_NV`] but the `sincos` that stores
/// through pointers): the analysis may take a call of it as accessing no memory.
pub fn is_pure_libdevice(name: &str) -> bool {
    name != "__nv_fast_sincosf" && RUNTIME_NV.contains(&name)
}
