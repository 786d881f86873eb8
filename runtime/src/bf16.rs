//! `bfloat16` arithmetic on the CPU, exact as PTX defines `fma.rn.bf16`: `a × b + c` computed
//! in infinite precision, then rounded once to nearest even (CUDA's `cuda_bf16.hpp` builds
//! `__hadd`, `__hsub`, `__hmul` and `__hfma` on it for GPUs before sm_90). Subnormals are
//! kept; a NaN result is the canonical NaN `0x7fff`.
//!
//! A bf16 has 8 significant bits: a product of two is exact in an `f64` (16 bits, and
//! exponents within its range), and the sum with `c` is exact as an `f64` pair (`s + e`,
//! Knuth's two-sum). The rounding to bf16 then differs from rounding `s` alone only where
//! `s` is a midpoint between two bf16 values and `e` is not zero.

/// The `f64` value of the bf16 bits `h` (exact).
fn widen(h: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(h) << 16))
}

/// `s + e` (`|e|` at most half an `f64` ulp of `s`) rounded to the nearest bf16, ties to even.
fn round(s: f64, e: f64) -> u16 {
    if s.is_nan() {
        return 0x7fff;
    }
    if s.is_infinite() {
        return if s > 0.0 { 0x7f80 } else { 0xff80 };
    }
    if s == 0.0 {
        // An exact zero (e is zero too): its sign is IEEE's for the sum.
        return if s.is_sign_negative() { 0x8000 } else { 0 };
    }
    // The bf16 ulp at |s|: 2^(E - 7) for a normal exponent E, 2^-133 below 2^-126.
    let exponent = ((s.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let ulp = 2f64.powi(exponent.max(-126) - 7);
    // `s` in ulps, and the two bf16 values around it (exact: powers of two scale exactly).
    let q = s / ulp;
    let lo = q.floor();
    let fraction = q - lo;
    let r = if fraction > 0.5 {
        lo + 1.0
    } else if fraction < 0.5 {
        lo
    } else if e != 0.0 {
        // A midpoint only as far as `s` goes: the exact value lies on `e`'s side of it.
        if e > 0.0 {
            lo + 1.0
        } else {
            lo
        }
    } else if lo % 2.0 == 0.0 {
        lo
    } else {
        lo + 1.0
    };
    let v = r * ulp;
    if v == 0.0 {
        return if s.is_sign_negative() { 0x8000 } else { 0 };
    }
    // Past the largest bf16 (the rounding carried out of its range): infinity.
    let f = v as f32;
    if f.is_infinite() {
        return if v > 0.0 { 0x7f80 } else { 0xff80 };
    }
    (f.to_bits() >> 16) as u16
}

/// `fma.rn.bf16`: `a × b + c`, rounded once.
pub fn fma(a: u16, b: u16, c: u16) -> u16 {
    let (a, b, c) = (widen(a), widen(b), widen(c));
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return 0x7fff;
    }
    let p = a * b;
    if p.is_nan() {
        // 0 × infinity.
        return 0x7fff;
    }
    let s = p + c;
    if s.is_nan() {
        // infinity - infinity.
        return 0x7fff;
    }
    if s.is_infinite() || p.is_infinite() || c.is_infinite() {
        return round(s, 0.0);
    }
    // Two-sum: p + c = s + e exactly.
    let v = s - p;
    let e = (p - (s - v)) + (c - v);
    round(s, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf(x: f32) -> u16 {
        // Round to nearest even from f32 (exact for the values used below).
        let b = x.to_bits();
        ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
    }

    #[test]
    fn small_integers_are_exact() {
        for a in -20i32..20 {
            for b in -20i32..20 {
                for c in [-3i32, 0, 5] {
                    let want = (a * b + c) as f32;
                    assert_eq!(fma(bf(a as f32), bf(b as f32), bf(c as f32)), bf(want), "{a} * {b} + {c}");
                }
            }
        }
    }

    #[test]
    fn products_and_sums_round_once_to_even() {
        // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14: down to 1 + 2^-6.
        assert_eq!(fma(0x3f81, 0x3f81, 0x8000), 0x3f82);
        // 1 × (1 + 2^-7) + 2^-8 is a midpoint: to the even 1 + 2^-6.
        assert_eq!(fma(0x3f80, 0x3f81, 0x3b80), 0x3f82);
        // 1.125 × 0.90625 = 1 + 2^-6 + 2^-8, the midpoint of 0x3f82 (even) and 0x3f83: to even,
        // but with 2^-100 added the exact value is above it (an f64 sum alone would round
        // the addend away and pick the even neighbour), and below it with -2^-100.
        assert_eq!(fma(0x3f90, 0x3f68, 0x8000), 0x3f82);
        assert_eq!(fma(0x3f90, 0x3f68, 0x0d80), 0x3f83);
        assert_eq!(fma(0x3f90, 0x3f68, 0x8d80), 0x3f82);
        // The same negated.
        assert_eq!(fma(0xbf90, 0x3f68, 0x8d80), 0xbf83);
    }

    #[test]
    fn signs_infinities_and_nans() {
        assert_eq!(fma(0x8000, 0x3f80, 0x0000), 0x0000); // -0 * 1 + 0 = +0
        assert_eq!(fma(0x8000, 0x3f80, 0x8000), 0x8000); // -0 * 1 + -0 = -0
        assert_eq!(fma(0x7f80, 0x0000, 0x3f80), 0x7fff); // inf * 0
        assert_eq!(fma(0x7f80, 0x3f80, 0xff80), 0x7fff); // inf - inf
        assert_eq!(fma(0x7f80, 0x3f80, 0x3f80), 0x7f80);
        assert_eq!(fma(0x7fc0, 0x3f80, 0x3f80), 0x7fff);
        // The largest bf16 doubled overflows.
        assert_eq!(fma(0x7f7f, 0x4000, 0x8000), 0x7f80);
        // Subnormals: the smallest (2^-133) times one, and halved (a tie to even zero).
        assert_eq!(fma(0x0001, 0x3f80, 0x8000), 0x0001);
        assert_eq!(fma(0x0001, 0x3f00, 0x8000), 0x0000);
        assert_eq!(fma(0x0003, 0x3f00, 0x8000), 0x0002); // 1.5 ulp: to even, 2
    }
}
