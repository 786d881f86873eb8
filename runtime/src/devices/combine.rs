//! The GPU kernels that combine the partial results of a reduction split across GPUs
//! (`partitioned::reduce`): `dst[i] = dst[i] op src[i]`, one element per thread, written as
//! PTX here (the program's own modules hold only its kernels). One module holds a kernel per
//! operation and type; the driver compiles it at the first reduction a GPU combines.
//!
//! Float sums use `add.rn` (round to nearest, never fused with anything): the one rounding a
//! sum of two partial results has.

use dashdb::{ReduceOp, ReduceType, Reduction};
use std::ffi::CStr;
use std::fmt::Write;

/// Threads per block of a combining kernel.
pub const BLOCK: u32 = 256;

/// The combinations dashdb allows (`Reduction::is_valid`), each with its kernel.
const KINDS: [(ReduceOp, ReduceType); 18] = {
    use ReduceOp::*;
    use ReduceType::*;
    [
        (Add, U32),
        (Add, U64),
        (Add, F32),
        (Add, F64),
        (Min, I32),
        (Min, U32),
        (Min, I64),
        (Min, U64),
        (Max, I32),
        (Max, U32),
        (Max, I64),
        (Max, U64),
        (And, U32),
        (And, U64),
        (Or, U32),
        (Or, U64),
        (Xor, U32),
        (Xor, U64),
    ]
};

/// Integer sums and bitwise operations do not depend on signedness: one kernel for both.
fn canonical(how: Reduction) -> (ReduceOp, ReduceType) {
    use ReduceType::*;
    let element = match (how.op, how.element) {
        (ReduceOp::Min | ReduceOp::Max, t) => t,
        (_, I32) => U32,
        (_, I64) => U64,
        (_, t) => t,
    };
    (how.op, element)
}

/// The kernel's name for `how`.
pub fn kernel_name(how: Reduction) -> String {
    let (op, element) = canonical(how);
    format!("hpvm_mgpu_combine_{}_{}", op.as_str(), element.as_str())
}

/// The module's PTX, made once.
pub fn ptx() -> &'static CStr {
    static PTX: std::sync::OnceLock<&'static CStr> = std::sync::OnceLock::new();
    PTX.get_or_init(|| {
        let text = module_text();
        let c = std::ffi::CString::new(text).expect("PTX has no NUL");
        // Kept for the run: the driver's modules are keyed by the text's address.
        Box::leak(c.into_boxed_c_str())
    })
}

fn module_text() -> String {
    let mut s = String::from(".version 6.0\n.target sm_50\n.address_size 64\n");
    for (op, element) in KINDS {
        let how = Reduction { op, element };
        let (reg, ld, shift) = match element {
            ReduceType::F32 => (".f32", "f32", 2),
            ReduceType::F64 => (".f64", "f64", 3),
            ReduceType::I32 | ReduceType::U32 => (".b32", "b32", 2),
            ReduceType::I64 | ReduceType::U64 => (".b64", "b64", 3),
        };
        let bits = if shift == 2 { 32 } else { 64 };
        let instruction = match (op, element) {
            (ReduceOp::Add, ReduceType::F32 | ReduceType::F64) => format!("add.rn.{ld}"),
            (ReduceOp::Add, _) => format!("add.u{bits}"),
            (ReduceOp::Min | ReduceOp::Max, t) => {
                let sign = if matches!(t, ReduceType::I32 | ReduceType::I64) { 's' } else { 'u' };
                format!("{}.{sign}{bits}", op.as_str())
            }
            (ReduceOp::And | ReduceOp::Or | ReduceOp::Xor, _) => format!("{}.b{bits}", op.as_str()),
        };
        let _ = write!(
            s,
            "
.visible .entry {name}(.param .u64 dst, .param .u64 src, .param .u64 n)
{{
\t.reg .pred %p;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<8>;
\t.reg {reg} %v<3>;
\tld.param.u64 %rd1, [dst];
\tld.param.u64 %rd2, [src];
\tld.param.u64 %rd3, [n];
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %ntid.x;
\tmov.u32 %r3, %tid.x;
\tmul.wide.u32 %rd4, %r1, %r2;
\tcvt.u64.u32 %rd5, %r3;
\tadd.u64 %rd4, %rd4, %rd5;
\tsetp.ge.u64 %p, %rd4, %rd3;
\t@%p bra DONE;
\tshl.b64 %rd4, %rd4, {shift};
\tadd.u64 %rd5, %rd1, %rd4;
\tadd.u64 %rd6, %rd2, %rd4;
\tld.global.{ld} %v1, [%rd5];
\tld.global.{ld} %v2, [%rd6];
\t{instruction} %v1, %v1, %v2;
\tst.global.{ld} [%rd5], %v1;
DONE:
\tret;
}}
",
            name = kernel_name(how)
        );
    }
    // A merged buffer (`dashdb::WriteKind::Merged`): byte `i` of another device's copy taken
    // where it differs from the twin, one byte per thread.
    let _ = write!(
        s,
        "
.visible .entry {MERGE}(.param .u64 dst, .param .u64 src, .param .u64 twin, .param .u64 n)
{{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b16 %h<3>;
	.reg .b64 %rd<10>;
	ld.param.u64 %rd1, [dst];
	ld.param.u64 %rd2, [src];
	ld.param.u64 %rd7, [twin];
	ld.param.u64 %rd3, [n];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mul.wide.u32 %rd4, %r1, %r2;
	cvt.u64.u32 %rd5, %r3;
	add.u64 %rd4, %rd4, %rd5;
	setp.ge.u64 %p0, %rd4, %rd3;
	@%p0 bra DONE;
	add.u64 %rd5, %rd1, %rd4;
	add.u64 %rd6, %rd2, %rd4;
	add.u64 %rd8, %rd7, %rd4;
	ld.global.u8 %h1, [%rd6];
	ld.global.u8 %h2, [%rd8];
	setp.eq.u16 %p1, %h1, %h2;
	@%p1 bra DONE;
	st.global.u8 [%rd5], %h1;
DONE:
	ret;
}}
"
    );
    s
}

/// The kernel that merges another device's changes ([`super::Device::merge_changed`]).
pub const MERGE: &str = "hpvm_mgpu_merge_changed";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_valid_reduction_has_its_kernel() {
        let text = ptx().to_str().unwrap();
        for op in [ReduceOp::Add, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or, ReduceOp::Xor] {
            for element in
                [ReduceType::I32, ReduceType::U32, ReduceType::I64, ReduceType::U64, ReduceType::F32, ReduceType::F64]
            {
                let how = Reduction { op, element };
                if how.is_valid() {
                    assert!(text.contains(&format!(".entry {}(", kernel_name(how))), "{how}");
                }
            }
        }
        assert!(text.contains("min.s32 %v1") && text.contains("max.u64 %v1") && text.contains("add.rn.f64 %v1"));
        assert_eq!(kernel_name(Reduction { op: ReduceOp::Add, element: ReduceType::I32 }), "hpvm_mgpu_combine_add_u32");
    }
}
