//! libdevice functions without a libm twin, for kernels running on the CPU.
//!
//! The CUDA frontend turns `__nv_expf` and its kin into libm's functions; these few have none
//! (integer `min`/`max`/`abs`, `__saturatef`, `rsqrtf`, and the fast approximations `__expf`…,
//! which the CPU computes exactly). On a GPU the kernels link libdevice's own.

#![allow(non_snake_case)]

macro_rules! binary {
    ($($name:ident: $t:ty => $e:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(a: $t, b: $t) -> $t {
            let f: fn($t, $t) -> $t = $e;
            f(a, b)
        }
    )*};
}

macro_rules! unary {
    ($($name:ident: $t:ty => $e:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(a: $t) -> $t {
            let f: fn($t) -> $t = $e;
            f(a)
        }
    )*};
}

binary! {
    __nv_min: i32 => |a, b| a.min(b);
    __nv_max: i32 => |a, b| a.max(b);
    __nv_umin: u32 => |a, b| a.min(b);
    __nv_umax: u32 => |a, b| a.max(b);
    __nv_llmin: i64 => |a, b| a.min(b);
    __nv_llmax: i64 => |a, b| a.max(b);
    __nv_ullmin: u64 => |a, b| a.min(b);
    __nv_ullmax: u64 => |a, b| a.max(b);
    __nv_fast_powf: f32 => |a, b| a.powf(b);
    __nv_fast_fdividef: f32 => |a, b| a / b;
}

unary! {
    __nv_abs: i32 => |a| a.wrapping_abs();
    __nv_llabs: i64 => |a| a.wrapping_abs();
    // NaN saturates to 0, as on the GPU.
    __nv_saturatef: f32 => |a| if a > 0.0 { a.min(1.0) } else { 0.0 };
    __nv_rsqrtf: f32 => |a| 1.0 / a.sqrt();
    __nv_rsqrt: f64 => |a| 1.0 / a.sqrt();
    __nv_fast_expf: f32 => |a| a.exp();
    __nv_fast_exp10f: f32 => |a| 10f32.powf(a);
    __nv_fast_logf: f32 => |a| a.ln();
    __nv_fast_log2f: f32 => |a| a.log2();
    __nv_fast_log10f: f32 => |a| a.log10();
    __nv_fast_sinf: f32 => |a| a.sin();
    __nv_fast_cosf: f32 => |a| a.cos();
    __nv_fast_tanf: f32 => |a| a.tan();
}

/// `__sincosf`: the sine and cosine of `a` through `s` and `c`, exactly on the CPU.
///
/// # Safety
/// `s` and `c` point to writable floats (the kernel's locals).
#[no_mangle]
pub unsafe extern "C" fn __nv_fast_sincosf(a: f32, s: *mut f32, c: *mut f32) {
    // SAFETY: as the caller's.
    unsafe {
        *s = a.sin();
        *c = a.cos();
    }
}

// Integer and bit functions (`__byte_perm`, `__umul24`, `__ffs`...), exactly as PTX defines
// them.
binary! {
    __nv_umul24: u32 => |a, b| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff);
    __nv_mul24: i32 => |a, b| ((a << 8) >> 8).wrapping_mul((b << 8) >> 8);
    __nv_umulhi: u32 => |a, b| ((u64::from(a) * u64::from(b)) >> 32) as u32;
    __nv_mulhi: i32 => |a, b| ((i64::from(a) * i64::from(b)) >> 32) as i32;
    __nv_umul64hi: u64 => |a, b| ((u128::from(a) * u128::from(b)) >> 64) as u64;
    __nv_mul64hi: i64 => |a, b| ((i128::from(a) * i128::from(b)) >> 64) as i64;
    __nv_hadd: i32 => |a, b| ((i64::from(a) + i64::from(b)) >> 1) as i32;
    __nv_rhadd: i32 => |a, b| ((i64::from(a) + i64::from(b) + 1) >> 1) as i32;
    __nv_uhadd: u32 => |a, b| ((u64::from(a) + u64::from(b)) >> 1) as u32;
    __nv_urhadd: u32 => |a, b| ((u64::from(a) + u64::from(b) + 1) >> 1) as u32;
    // Round-to-nearest arithmetic is the CPU's own.
    __nv_fadd_rn: f32 => |a, b| a + b;
    __nv_fsub_rn: f32 => |a, b| a - b;
    __nv_fmul_rn: f32 => |a, b| a * b;
    __nv_fdiv_rn: f32 => |a, b| a / b;
    __nv_dadd_rn: f64 => |a, b| a + b;
    __nv_dsub_rn: f64 => |a, b| a - b;
    __nv_dmul_rn: f64 => |a, b| a * b;
    __nv_ddiv_rn: f64 => |a, b| a / b;
    __nv_fdividef: f32 => |a, b| a / b;
}

unary! {
    __nv_ffs: i32 => |a| if a == 0 { 0 } else { a.trailing_zeros() as i32 + 1 };
    __nv_popc: u32 => |a| a.count_ones();
    __nv_clz: i32 => |a| a.leading_zeros() as i32;
    __nv_brev: u32 => |a| a.reverse_bits();
    __nv_brevll: u64 => |a| a.reverse_bits();
    __nv_fsqrt_rn: f32 => |a| a.sqrt();
    __nv_dsqrt_rn: f64 => |a| a.sqrt();
    __nv_frcp_rn: f32 => |a| 1.0 / a;
    __nv_drcp_rn: f64 => |a| 1.0 / a;
}

/// `__frsqrt_rn`: `1 / sqrt(a)` rounded to the nearest float. The double's estimate is within
/// an ulp of it; the two midpoints around that float decide, exactly, whether the neighbour
/// above or below is nearer (`m² × a` against 1, in integers: a midpoint has 25 bits).
#[no_mangle]
pub extern "C" fn __nv_frsqrt_rn(a: f32) -> f32 {
    if a.is_nan() || a < 0.0 {
        return f32::NAN;
    }
    if a == 0.0 {
        return if a.is_sign_negative() { f32::NEG_INFINITY } else { f32::INFINITY };
    }
    if a.is_infinite() {
        return 0.0;
    }
    let y = (1.0 / f64::from(a).sqrt()) as f32;
    // a = ma × 2^ea and y = my × 2^ey, integers (y is always a normal float here).
    let split = |v: f32| -> (u128, i32) {
        let b = v.to_bits();
        let (e, f) = ((b >> 23) & 0xff, b & 0x7f_ffff);
        if e == 0 {
            (u128::from(f), -149)
        } else {
            (u128::from(f | 0x80_0000), e as i32 - 150)
        }
    };
    let (ma, ea) = split(a);
    // Whether (m × 2^e)² × a is below 1, for the midpoint m × 2^e.
    let below_one = |m: u128, e: i32| -> bool {
        let p = m * m * ma;
        let k = 2 * e + ea;
        if k >= 0 {
            return false;
        }
        -k >= 128 || p < (1u128 << -k)
    };
    let (my, ey) = split(y);
    // Midpoints above and below y: (2 my ± 1) × 2^(ey - 1).
    if below_one(2 * my + 1, ey - 1) {
        f32::from_bits(y.to_bits() + 1)
    } else if !below_one(2 * my - 1, ey - 1) {
        f32::from_bits(y.to_bits() - 1)
    } else {
        y
    }
}

#[no_mangle]
pub extern "C" fn __nv_ffsll(a: i64) -> i32 {
    if a == 0 {
        0
    } else {
        a.trailing_zeros() as i32 + 1
    }
}

#[no_mangle]
pub extern "C" fn __nv_popcll(a: u64) -> i32 {
    a.count_ones() as i32
}

#[no_mangle]
pub extern "C" fn __nv_clzll(a: i64) -> i32 {
    a.leading_zeros() as i32
}

/// `__byte_perm(x, y, s)`: byte `i` of the result is byte `s >> 4i & 7` of the eight bytes of
/// `y:x` (x the low four).
#[no_mangle]
pub extern "C" fn __nv_byte_perm(x: u32, y: u32, s: u32) -> u32 {
    let bytes = (u64::from(y) << 32) | u64::from(x);
    (0..4).fold(0, |r, i| {
        let pick = (s >> (4 * i)) & 7;
        r | ((((bytes >> (8 * pick)) & 0xff) as u32) << (8 * i))
    })
}

#[no_mangle]
pub extern "C" fn __nv_sad(a: i32, b: i32, c: u32) -> u32 {
    (i64::from(a) - i64::from(b)).unsigned_abs() as u32 + c
}

#[no_mangle]
pub extern "C" fn __nv_usad(a: u32, b: u32, c: u32) -> u32 {
    a.abs_diff(b) + c
}

#[no_mangle]
pub extern "C" fn __nv_fmaf_rn(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

#[no_mangle]
pub extern "C" fn __nv_fma_rn(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

// Reinterpretations.
#[no_mangle]
pub extern "C" fn __nv_float_as_int(a: f32) -> i32 {
    a.to_bits() as i32
}
#[no_mangle]
pub extern "C" fn __nv_float_as_uint(a: f32) -> u32 {
    a.to_bits()
}
#[no_mangle]
pub extern "C" fn __nv_int_as_float(a: i32) -> f32 {
    f32::from_bits(a as u32)
}
#[no_mangle]
pub extern "C" fn __nv_uint_as_float(a: u32) -> f32 {
    f32::from_bits(a)
}
#[no_mangle]
pub extern "C" fn __nv_double_as_longlong(a: f64) -> i64 {
    a.to_bits() as i64
}
#[no_mangle]
pub extern "C" fn __nv_longlong_as_double(a: i64) -> f64 {
    f64::from_bits(a as u64)
}

// Classification, as C's macros answer (non-zero for true).
#[no_mangle]
pub extern "C" fn __nv_isnanf(a: f32) -> i32 {
    i32::from(a.is_nan())
}
#[no_mangle]
pub extern "C" fn __nv_isnand(a: f64) -> i32 {
    i32::from(a.is_nan())
}
#[no_mangle]
pub extern "C" fn __nv_isinff(a: f32) -> i32 {
    i32::from(a.is_infinite())
}
#[no_mangle]
pub extern "C" fn __nv_isinfd(a: f64) -> i32 {
    i32::from(a.is_infinite())
}
#[no_mangle]
pub extern "C" fn __nv_finitef(a: f32) -> i32 {
    i32::from(a.is_finite())
}
#[no_mangle]
pub extern "C" fn __nv_isfinited(a: f64) -> i32 {
    i32::from(a.is_finite())
}
#[no_mangle]
pub extern "C" fn __nv_signbitf(a: f32) -> i32 {
    i32::from(a.is_sign_negative())
}
#[no_mangle]
pub extern "C" fn __nv_signbitd(a: f64) -> i32 {
    i32::from(a.is_sign_negative())
}

/// Float to integer in the four rounding modes, saturating as PTX's `cvt` does (NaN is 0).
macro_rules! to_int {
    ($($name:ident: $f:ty => $i:ty, $round:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(a: $f) -> $i {
            let round: fn($f) -> $f = $round;
            // Rust's `as` saturates and maps NaN to 0, as `cvt.*i` does.
            round(a) as $i
        }
    )*};
}

to_int! {
    __nv_float2int_rn: f32 => i32, |a| a.round_ties_even();
    __nv_float2int_rz: f32 => i32, |a| a.trunc();
    __nv_float2int_rd: f32 => i32, |a| a.floor();
    __nv_float2int_ru: f32 => i32, |a| a.ceil();
    __nv_float2uint_rn: f32 => u32, |a| a.round_ties_even();
    __nv_float2uint_rz: f32 => u32, |a| a.trunc();
    __nv_float2uint_rd: f32 => u32, |a| a.floor();
    __nv_float2uint_ru: f32 => u32, |a| a.ceil();
    __nv_float2ll_rn: f32 => i64, |a| a.round_ties_even();
    __nv_float2ll_rz: f32 => i64, |a| a.trunc();
    __nv_float2ll_rd: f32 => i64, |a| a.floor();
    __nv_float2ll_ru: f32 => i64, |a| a.ceil();
    __nv_float2ull_rn: f32 => u64, |a| a.round_ties_even();
    __nv_float2ull_rz: f32 => u64, |a| a.trunc();
    __nv_float2ull_rd: f32 => u64, |a| a.floor();
    __nv_float2ull_ru: f32 => u64, |a| a.ceil();
    __nv_double2int_rn: f64 => i32, |a| a.round_ties_even();
    __nv_double2int_rz: f64 => i32, |a| a.trunc();
    __nv_double2int_rd: f64 => i32, |a| a.floor();
    __nv_double2int_ru: f64 => i32, |a| a.ceil();
    __nv_double2uint_rn: f64 => u32, |a| a.round_ties_even();
    __nv_double2uint_rz: f64 => u32, |a| a.trunc();
    __nv_double2ll_rn: f64 => i64, |a| a.round_ties_even();
    __nv_double2ll_rz: f64 => i64, |a| a.trunc();
    __nv_double2ll_rd: f64 => i64, |a| a.floor();
    __nv_double2ll_ru: f64 => i64, |a| a.ceil();
}

/// A 32-bit integer to `float` in a directed rounding: the nearest conversion (exact where
/// the integer fits 24 bits), moved one step where it went the wrong way (the integer is
/// exact as a double, so the comparison is).
fn int_to_float(x: f64, up: Option<bool>) -> f32 {
    let near = x as f32;
    let d = f64::from(near);
    match up {
        Some(true) if d < x => f32::from_bits(if near >= 0.0 { near.to_bits() + 1 } else { near.to_bits() - 1 }),
        Some(false) if d > x => f32::from_bits(if near > 0.0 { near.to_bits() - 1 } else { near.to_bits() + 1 }),
        // Toward zero: down for positive values, up for negative ones.
        None if d.abs() > x.abs() => f32::from_bits(near.to_bits() - 1),
        _ => near,
    }
}

#[no_mangle]
pub extern "C" fn __nv_int2float_rn(a: i32) -> f32 {
    a as f32
}
#[no_mangle]
pub extern "C" fn __nv_int2float_ru(a: i32) -> f32 {
    int_to_float(f64::from(a), Some(true))
}
#[no_mangle]
pub extern "C" fn __nv_int2float_rd(a: i32) -> f32 {
    int_to_float(f64::from(a), Some(false))
}
#[no_mangle]
pub extern "C" fn __nv_int2float_rz(a: i32) -> f32 {
    int_to_float(f64::from(a), None)
}
#[no_mangle]
pub extern "C" fn __nv_uint2float_rn(a: u32) -> f32 {
    a as f32
}
#[no_mangle]
pub extern "C" fn __nv_uint2float_ru(a: u32) -> f32 {
    int_to_float(f64::from(a), Some(true))
}
#[no_mangle]
pub extern "C" fn __nv_uint2float_rd(a: u32) -> f32 {
    int_to_float(f64::from(a), Some(false))
}
#[no_mangle]
pub extern "C" fn __nv_uint2float_rz(a: u32) -> f32 {
    int_to_float(f64::from(a), None)
}

/// `pow(x, n)` with an integer exponent (clang's CUDA headers send `pow(double, int)` here):
/// libdevice's own algorithm, so the CPU rounds as the GPU does: square and multiply over the
/// exponent's bits from the lowest, each product rounded (no contraction), and one division
/// for a negative exponent.
macro_rules! powi {
    ($($name:ident: $t:ty;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(a: $t, b: i32) -> $t {
            let (mut base, mut e, mut r) = (a, b.unsigned_abs(), 1.0 as $t);
            loop {
                if e & 1 != 0 {
                    r *= base;
                }
                e >>= 1;
                if e == 0 {
                    return if b < 0 { 1.0 / r } else { r };
                }
                base *= base;
            }
        }
    )*};
}

powi! {
    __nv_powif: f32;
    __nv_powi: f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact where the result is a float (powers of four), and the nearest float elsewhere:
    /// no float nearer to the true value than the one returned, checked by the same squares.
    #[test]
    fn frsqrt_rn_is_the_nearest_float() {
        assert_eq!(__nv_frsqrt_rn(4.0), 0.5);
        assert_eq!(__nv_frsqrt_rn(0.25), 2.0);
        assert_eq!(__nv_frsqrt_rn(0.0), f32::INFINITY);
        assert_eq!(__nv_frsqrt_rn(f32::INFINITY), 0.0);
        assert!(__nv_frsqrt_rn(-1.0).is_nan());
        let mut x = 1.0e-40f32;
        while x < 1.0e38 {
            let y = __nv_frsqrt_rn(x);
            let err = |v: f32| ((f64::from(v) * f64::from(v) * f64::from(x)).sqrt() - 1.0).abs();
            let (down, up) = (f32::from_bits(y.to_bits() - 1), f32::from_bits(y.to_bits() + 1));
            assert!(err(y) <= err(down) && err(y) <= err(up), "{x}: {y}");
            x *= 1.37;
        }
    }

    /// libdevice's square-and-multiply: exact for small powers, the reciprocal of the
    /// positive power for negative exponents, and products rounded one at a time (x^3 is
    /// (x * x^2), not a fused or exact power).
    #[test]
    fn integer_powers_multiply_as_libdevice() {
        assert_eq!(__nv_powi(2.0, 10), 1024.0);
        assert_eq!(__nv_powi(2.0, -2), 0.25);
        assert_eq!(__nv_powi(-3.0, 3), -27.0);
        assert_eq!(__nv_powi(0.0, 0), 1.0);
        assert_eq!(__nv_powi(0.0, -1), f64::INFINITY);
        assert_eq!(__nv_powif(1.5, 2), 2.25);
        let x = 1.1f64;
        assert_eq!(__nv_powi(x, 6), (x * x) * ((x * x) * (x * x)));
        assert_eq!(__nv_powi(x, -6), 1.0 / __nv_powi(x, 6));
        let y = 1.1f32;
        assert_eq!(__nv_powif(y, 5), y * ((y * y) * (y * y)));
    }

    #[test]
    fn bit_functions_as_ptx_defines_them() {
        assert_eq!(__nv_byte_perm(0x4433_2211, 0x8877_6655, 0x0000_3210), 0x4433_2211);
        assert_eq!(__nv_byte_perm(0x4433_2211, 0x8877_6655, 0x0000_7654), 0x8877_6655);
        assert_eq!(__nv_byte_perm(0x4433_2211, 0x8877_6655, 0x0000_0123), 0x1122_3344);
        assert_eq!(__nv_umul24(0x0100_0003, 5), 15);
        assert_eq!(__nv_mul24(0x00ff_ffff, 2), -2);
        assert_eq!(__nv_ffs(0), 0);
        assert_eq!(__nv_ffs(8), 4);
        assert_eq!(__nv_ffsll(1 << 40), 41);
        assert_eq!(__nv_clz(1), 31);
        assert_eq!(__nv_brev(1), 0x8000_0000);
        assert_eq!(__nv_popcll(u64::MAX), 64);
        assert_eq!(__nv_umulhi(u32::MAX, u32::MAX), u32::MAX - 1);
        assert_eq!(__nv_mulhi(-1, 1), -1);
        assert_eq!(__nv_sad(-3, 4, 1), 8);
        assert_eq!(__nv_uhadd(u32::MAX, u32::MAX), u32::MAX);
        assert_eq!(__nv_rhadd(1, 2), 2);
    }

    #[test]
    fn conversions_round_and_saturate_as_cvt() {
        assert_eq!(__nv_float2int_rn(2.5), 2);
        assert_eq!(__nv_float2int_rn(3.5), 4);
        assert_eq!(__nv_float2int_rd(-1.5), -2);
        assert_eq!(__nv_float2int_ru(-1.5), -1);
        assert_eq!(__nv_float2int_rz(f32::NAN), 0);
        assert_eq!(__nv_float2int_rz(1e20), i32::MAX);
        assert_eq!(__nv_float2uint_rz(-5.0), 0);
        assert_eq!(__nv_float2ll_rn(-2.5), -2);
        // 2^24 + 1 is not a float: down to 2^24, up to 2^24 + 2.
        let x = (1 << 24) + 1;
        assert_eq!(__nv_int2float_rd(x), 16_777_216.0);
        assert_eq!(__nv_int2float_ru(x), 16_777_218.0);
        assert_eq!(__nv_int2float_rz(-x), -16_777_216.0);
        assert_eq!(__nv_int2float_ru(-x), -16_777_216.0);
        assert_eq!(__nv_int2float_rd(-x), -16_777_218.0);
        assert_eq!(__nv_uint2float_rz(u32::MAX), 4_294_967_040.0);
        assert_eq!(__nv_int2float_ru(7), 7.0);
    }

    #[test]
    fn integer_and_saturating_functions() {
        assert_eq!(__nv_min(-3, 2), -3);
        assert_eq!(__nv_umax(3, u32::MAX), u32::MAX);
        assert_eq!(__nv_abs(i32::MIN), i32::MIN);
        assert_eq!(__nv_saturatef(f32::NAN), 0.0);
        assert_eq!(__nv_saturatef(2.5), 1.0);
        assert_eq!(__nv_saturatef(-0.5), 0.0);
        assert_eq!(__nv_rsqrtf(4.0), 0.5);
    }
}
