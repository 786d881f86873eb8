//! The analysis's conditions in the user's terms, for the reasons a launch runs whole.
//!
//! The analysis names the grid and the partition with parameters of its own (`gx`, `bidx`,
//! `bsx`, `boffx`, ...: `analysis::wrap`) and writes conditions as ISL sets
//! (`[gx, boffx] -> { : boffx = 0 and gx > 0 }`). A reason that quotes them names nothing the
//! user wrote. [`in_user_terms`] keeps the condition alone and spells each of those
//! parameters as CUDA does (`gridDim.x`, `blockIdx.x`, `blockDim.x`); the kernel's own
//! parameters keep their names.

/// `cond` (an ISL set's text or a bare condition) with the analysis's own parameters spelt
/// as CUDA spells them and the set's syntax left out.
pub(crate) fn in_user_terms(cond: &str) -> String {
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
        match spelt(name) {
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

/// How CUDA spells one of the analysis's parameters.
fn spelt(name: &str) -> Option<&'static str> {
    Some(match name {
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
            in_user_terms("[gx, boffx] -> {  : boffx = 0 and gx > 0 }"),
            "(the first block of a part of the grid, along x) = 0 and gridDim.x > 0"
        );
        assert_eq!(
            in_user_terms("[bidy, bidx, input_w] -> { : bidy <= 4 and 32768bidx <= -243 + input_w }"),
            "blockIdx.y <= 4 and 32768*blockIdx.x <= -243 + input_w"
        );
        // Bare conditions, and names that only contain the parameters' names, stay as they are.
        assert_eq!(in_user_terms("n * bsx <= 2147483647"), "n * blockDim.x <= 2147483647");
        assert_eq!(in_user_terms("gxx + bidx_2 > 0"), "gxx + bidx_2 > 0");
    }
}
