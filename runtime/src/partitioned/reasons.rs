//! The analysis's conditions in the user's terms, for the reasons a launch runs whole.
//!
//! The analysis names the grid and the partition with parameters of its own (`gx`, `bidx`,
//! `bsx`, `boffx`, ...: `analysis::wrap`) and writes conditions as ISL sets
//! (`[gx, boffx] -> { : boffx = 0 and gx > 0 }`). A reason that quotes them names nothing the
//! user wrote. [`in_user_terms`] keeps the condition alone and spells each of those
//! parameters as CUDA does (`gridDim.x`, `blockIdx.x`, `blockDim.x`) for a grid of blocks, and
//! as the node's instances for an HPVM-C node whose grid is of instances; the kernel's own
//! parameters keep their names.

/// `cond` (an ISL set's text or a bare condition) with the analysis's own parameters spelt
/// as the user knows them and the set's syntax left out; `blocks`: the unit's grid is of
/// thread blocks (a CUDA kernel's), else of a node's instances.
pub(crate) fn in_user_terms(cond: &str, blocks: bool) -> String {
    let body = match (cond.find('{'), cond.rfind('}')) {
        (Some(a), Some(b)) if a < b => {
            let inner = cond[a + 1..b].trim();
            inner.strip_prefix(':').unwrap_or(inner).trim()
        }
        _ => cond.trim(),
    };
    let mut out = String::with_capacity(body.len() + 16);
    let mut word = String::new();
    // ISL writes a coefficient against its name (`32768bidx`).
    let flush = |word: &mut String, out: &mut String| {
        let name = word.trim_start_matches(|c: char| c.is_ascii_digit());
        match spelt(name, blocks) {
            Some(s) if name.len() < word.len() => {
                out.push_str(&word[..word.len() - name.len()]);
                out.push('*');
                out.push_str(s);
            }
            Some(s) => out.push_str(s),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in body.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// How the user knows one of the analysis's parameters.
fn spelt(name: &str, blocks: bool) -> Option<&'static str> {
    Some(match name {
        "gx" if !blocks => "(instances along x)",
        "gy" if !blocks => "(instances along y)",
        "gz" if !blocks => "(instances along z)",
        "gx" => "gridDim.x",
        "gy" => "gridDim.y",
        "gz" => "gridDim.z",
        "bidx" => "blockIdx.x",
        "bidy" => "blockIdx.y",
        "bidz" => "blockIdx.z",
        "bsx" => "blockDim.x",
        "bsy" => "blockDim.y",
        "bsz" => "blockDim.z",
        // Where a partition starts: a split launch's part of the grid begins at a block
        // other than 0, which maps that hold only from block 0 cannot describe.
        "boffx" => "(the first block of a part of the grid, along x)",
        "boffy" => "(the first block of a part of the grid, along y)",
        "boffz" => "(the first block of a part of the grid, along z)",
        "px" => "(the parent's id, x)",
        "py" => "(the parent's id, y)",
        "pz" => "(the parent's id, z)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HeCBench mixbench's and zoom's reasons, as the statistics gave them.
    #[test]
    fn conditions_name_what_the_user_wrote() {
        assert_eq!(
            in_user_terms("[gx, boffx] -> {  : boffx = 0 and gx > 0 }", true),
            "(the first block of a part of the grid, along x) = 0 and gridDim.x > 0"
        );
        assert_eq!(
            in_user_terms("[bidy, bidx, input_w] -> { : bidy <= 4 and 32768bidx <= -243 + input_w }", true),
            "blockIdx.y <= 4 and 32768*blockIdx.x <= -243 + input_w"
        );
        // Bare conditions, and names that only contain the parameters' names, stay as they are.
        assert_eq!(in_user_terms("n * bsx <= 2147483647", true), "n * blockDim.x <= 2147483647");
        assert_eq!(in_user_terms("gxx + bidx_2 > 0", true), "gxx + bidx_2 > 0");
        // An HPVM-C node's grid is of instances.
        assert_eq!(
            in_user_terms("(gx - 1) * w + (w - 1) < 4294967296", false),
            "((instances along x) - 1) * w + (w - 1) < 4294967296"
        );
    }
}
