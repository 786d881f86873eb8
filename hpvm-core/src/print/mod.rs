//! Printers of a verified graph: readable text and Graphviz.

mod dot;
mod text;

pub use dot::to_dot;
pub use text::to_text;
