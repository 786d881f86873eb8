//! Byte layouts of argument buffers and output records: values packed in order, each taking
//! its type's store size. The description records them; entry points read them.

use contract::desc::ScalarKind;
use inkwell::targets::TargetData;
use inkwell::types::{AnyType, BasicTypeEnum};

/// The size in bytes `ty` occupies in a packed buffer.
pub fn size_of(data: &TargetData, ty: &dyn AnyType) -> u32 {
    data.get_store_size(ty) as u32
}

pub fn scalar_kind(ty: BasicTypeEnum<'_>) -> ScalarKind {
    match ty {
        BasicTypeEnum::IntType(_) => ScalarKind::Int,
        BasicTypeEnum::FloatType(_) => ScalarKind::Float,
        BasicTypeEnum::PointerType(_) => ScalarKind::Pointer,
        _ => ScalarKind::Other,
    }
}

/// Offsets of values of the given sizes packed one after another.
pub fn packed_offsets(sizes: &[u32]) -> Vec<u32> {
    sizes
        .iter()
        .scan(0u32, |at, &s| {
            let o = *at;
            *at += s;
            Some(o)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn packs_in_order() {
        assert_eq!(super::packed_offsets(&[8, 8, 4, 8]), vec![0, 8, 16, 20]);
        assert!(super::packed_offsets(&[]).is_empty());
    }
}
