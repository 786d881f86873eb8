//! Source locations, as the user wrote them (from the IR's debug info).

use std::fmt;

/// A `file:line:column` position in the user's source. `line`/`column` are 1-based; a
/// column of 0 means the debug info gave none.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SrcLoc {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for SrcLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.column == 0 {
            write!(f, "{}:{}", self.file, self.line)
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        }
    }
}

/// Renders an optional location; IR without debug info has none.
pub fn show(loc: &Option<SrcLoc>) -> String {
    loc.as_ref().map_or_else(|| "<unknown location>".to_string(), |l| l.to_string())
}
