//! The HPVM-C API functions, recognised by name in the IR.

use crate::graph::{AtomicOp, Dim, MathFn, Query};

/// A call to one of the functions of `include/hpvm.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intrinsic {
    Hint,
    Attributes,
    Return,
    // graph construction: internal nodes only
    CreateNode,
    BindIn,
    BindOut,
    Edge,
    // host only
    Init,
    Cleanup,
    Launch,
    Wait,
    Push,
    Pop,
    TrackMem,
    UntrackMem,
    RequestMem,
    // leaf nodes
    Query(Query),
}

impl Intrinsic {
    pub fn from_name(name: &str) -> Option<Intrinsic> {
        if let Some(rest) = name.strip_prefix("llvm_hpvm_") {
            return match rest {
                "track_mem" => Some(Intrinsic::TrackMem),
                "untrack_mem" => Some(Intrinsic::UntrackMem),
                "request_mem" => Some(Intrinsic::RequestMem),
                _ => None,
            };
        }
        let rest = name.strip_prefix("__hpvm__")?;
        let dim = |s: &str| match s {
            "x" => Some(Dim::X),
            "y" => Some(Dim::Y),
            "z" => Some(Dim::Z),
            _ => None,
        };
        if let Some(d) = rest.strip_prefix("getNodeInstanceID_") {
            return dim(d).map(|d| Intrinsic::Query(Query::InstanceId(d)));
        }
        if let Some(d) = rest.strip_prefix("getNumNodeInstances_") {
            return dim(d).map(|d| Intrinsic::Query(Query::NumInstances(d)));
        }
        if let Some(op) = rest.strip_prefix("atomic_") {
            return AtomicOp::ALL.iter().find(|a| a.name() == op).map(|&a| Intrinsic::Query(Query::Atomic(a)));
        }
        if let Some(m) = MathFn::ALL.iter().find(|m| m.name() == rest) {
            return Some(Intrinsic::Query(Query::Math(*m)));
        }
        Some(match rest {
            "hint" => Intrinsic::Hint,
            "attributes" => Intrinsic::Attributes,
            "return" => Intrinsic::Return,
            "createNodeND" => Intrinsic::CreateNode,
            "bindIn" => Intrinsic::BindIn,
            "bindOut" => Intrinsic::BindOut,
            "edge" => Intrinsic::Edge,
            "init" => Intrinsic::Init,
            "cleanup" => Intrinsic::Cleanup,
            "launch" => Intrinsic::Launch,
            "wait" => Intrinsic::Wait,
            "push" => Intrinsic::Push,
            "pop" => Intrinsic::Pop,
            "getNode" => Intrinsic::Query(Query::GetNode),
            "getParentNode" => Intrinsic::Query(Query::GetParentNode),
            "barrier" => Intrinsic::Query(Query::Barrier),
            "malloc" => Intrinsic::Query(Query::Malloc),
            _ => return None,
        })
    }

    /// Describes a graph in an internal node; not allowed in a leaf.
    pub fn is_graph_construction(self) -> bool {
        matches!(self, Intrinsic::CreateNode | Intrinsic::BindIn | Intrinsic::BindOut | Intrinsic::Edge)
    }

    /// Belongs in host code only.
    pub fn is_host_only(self) -> bool {
        matches!(
            self,
            Intrinsic::Init
                | Intrinsic::Cleanup
                | Intrinsic::Launch
                | Intrinsic::Wait
                | Intrinsic::Push
                | Intrinsic::Pop
                | Intrinsic::TrackMem
                | Intrinsic::UntrackMem
                | Intrinsic::RequestMem
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_every_header_function() {
        let header = include_str!("../../include/hpvm.h");
        let mut seen = 0;
        for word in header.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if (word.starts_with("__hpvm__") || word.starts_with("llvm_hpvm_")) && word.len() > 8 {
                assert!(Intrinsic::from_name(word).is_some(), "{word} is declared in hpvm.h but not recognised");
                seen += 1;
            }
        }
        assert!(seen > 40, "only {seen} API names found in hpvm.h");
        assert_eq!(Intrinsic::from_name("__hpvm__atomic_umin"), Some(Intrinsic::Query(Query::Atomic(AtomicOp::Umin))));
        assert_eq!(Intrinsic::from_name("__hpvm__getNodeInstanceID_w"), None);
        assert_eq!(Intrinsic::from_name("printf"), None);
    }
}
