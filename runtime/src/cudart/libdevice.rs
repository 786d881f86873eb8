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
}

#[cfg(test)]
mod tests {
    use super::*;

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
