//! Where Polly's delinearized subscripts name the elements really accessed.
//!
//! Polly sees `in[(y + j) * w + x + i]` as `in[y + j][x + i]` of shape `[*][w]`. That names
//! the element really read only while the inner subscript stays within `0..w`: the access's
//! in-bounds condition, a set of parameter values. The shim turns Polly's own in-bounds
//! assumptions off and this module states them, one per access, so that a read whose
//! condition fails at a launch costs that read its precision (it is then read whole), not
//! the whole node its split.
//!
//! Delinearization divides an address by the array's extents; a term it cannot divide stays
//! whole in the innermost subscript as a compound parameter. A loop from `-r` gives
//! `in[y + j'][p_5 + x + i']` with `p_5 = (-r) * (1 + w)`, whose in-bounds condition then
//! never holds. With the expansion the shim gives (`-r*w - r`), the parts are moved to the
//! subscripts they belong to (`in[y + j' - r][x + i' - r]`), which changes no address: the
//! linear offset `sum of subscript × stride` is the same before and after.
//!
//! Invariant: after [`settle`], every access of an array of several dimensions has its
//! `in_bounds`, and its relation names the elements really accessed wherever that holds.

use crate::polly::{Array, Compound, Scops};
use isl_glue::Isl;

/// A product `coefficient × names` (names sorted; empty for a constant).
type Monomial = (i64, Vec<String>);

/// Unfolds compound parameters in every access relation and states each access's in-bounds
/// condition. An access whose condition cannot be computed gets `false` (never a guess).
pub fn settle(isl: &Isl, scops: &mut Scops) {
    let Scops { arrays, statements, accesses, compound, .. } = scops;
    for acc in accesses.iter_mut() {
        let Some(array) = arrays.iter().find(|a| acc.relation.contains(&format!("-> {}[", a.name))) else {
            continue;
        };
        if array.sizes.len() < 2 {
            continue;
        }
        let mut conds: Vec<String> = Vec::new();
        for c in compound.iter() {
            if let Some(rel) = unfold(isl, &acc.relation, array, c) {
                acc.relation = rel;
                conds.extend(c.conds.iter().cloned());
            }
        }
        let domain = statements.iter().find(|s| s.name == acc.statement).map(|s| s.domain.as_str());
        let inb = domain.and_then(|d| in_bounds(isl, &acc.relation, d, array, &conds));
        acc.in_bounds = Some(inb.unwrap_or_else(|| "{ : false }".to_string()));
    }
}

/// `[N] -> { [] -> [(N)] }` as `(1, ["N"])`, `{ [] -> [(20)] }` as `(20, [])`.
fn monomial(size: &str) -> Option<Monomial> {
    let e = crate::maps::size_expr(size);
    if let Ok(v) = e.parse::<i64>() {
        return Some((v, vec![]));
    }
    let ident = !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    ident.then(|| (1, vec![e]))
}

/// The relation `rel` (of `array`) with the compound parameter `c` moved from its innermost
/// subscript to the subscripts its parts belong to; `None` when `rel` does not use `c`, or
/// the expansion does not divide into affine parts, or `c` is used elsewhere too.
fn unfold(isl: &Isl, rel: &str, array: &Array, c: &Compound) -> Option<String> {
    let map = isl.map(rel).ok()?;
    if !map.involves_param(&c.name).ok()? {
        return None;
    }
    // The strides of the subscripts, innermost last: products of the inner extents.
    let d = array.sizes.len();
    let mut strides: Vec<Monomial> = vec![(1, vec![]); d];
    for k in (0..d - 1).rev() {
        let (sc, sn) = monomial(array.sizes[k + 1].as_deref()?)?;
        let (c0, n0) = &strides[k + 1];
        let mut names = n0.clone();
        names.extend(sn);
        names.sort();
        strides[k] = (c0.checked_mul(sc)?, names);
    }
    // Each term to the outermost subscript whose stride divides it.
    let mut parts: Vec<Vec<Monomial>> = vec![vec![]; d];
    for (coef, names) in &c.terms {
        let k = (0..d).find(|&k| {
            let (sc, sn) = &strides[k];
            *sc != 0 && coef % sc == 0 && contains_all(names, sn)
        })?;
        let (sc, sn) = &strides[k];
        parts[k].push((coef / sc, without(names, sn)));
    }
    if parts.iter().flatten().any(|(_, n)| n.len() > 1) {
        return None;
    }
    let affine = |terms: &[Monomial]| -> String {
        let t: Vec<String> =
            terms.iter().map(|(c, n)| if n.is_empty() { c.to_string() } else { format!("{c}*{}", n[0]) }).collect();
        if t.is_empty() {
            "0".into()
        } else {
            t.join(" + ")
        }
    };
    let mut names: Vec<String> = parts.iter().flatten().flat_map(|(_, n)| n.iter().cloned()).collect();
    names.push(c.name.clone());
    names.sort();
    names.dedup();
    let vars: Vec<String> = (0..d).map(|k| format!("o{k}")).collect();
    // The subscript holding `c` may hold it with either sign.
    for sign in [1i64, -1] {
        let outs: Vec<String> = (0..d)
            .map(|k| {
                let moved = if k == d - 1 { format!(" - {sign}*{}", c.name) } else { String::new() };
                format!("{}{moved} + {sign}*({})", vars[k], affine(&parts[k]))
            })
            .collect();
        let t = format!(
            "[{}] -> {{ {a}[{}] -> {a}[{}] }}",
            names.join(", "),
            vars.join(", "),
            outs.join(", "),
            a = array.name
        );
        let Ok(f) = isl.map(&t) else { continue };
        let Ok(moved) = map.copy().and_then(|m| m.apply_range(f)) else { continue };
        if moved.involves_param(&c.name).ok() == Some(false) {
            return moved.to_text().ok();
        }
    }
    None
}

/// The parameter names in a constraint's text.
fn names_in(constraint: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for w in constraint.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let word = w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if word && !["and", "or", "not", "mod", "floor"].contains(&w) && !names.iter().any(|n| n == w) {
            names.push(w.to_string());
        }
    }
    names
}

/// Whether the multiset `names` holds every name of `of` (both sorted).
fn contains_all(names: &[String], of: &[String]) -> bool {
    let mut rest = names.to_vec();
    of.iter().all(|n| match rest.iter().position(|x| x == n) {
        Some(i) => {
            rest.remove(i);
            true
        }
        None => false,
    })
}

/// `names` less one occurrence of each name of `of`.
fn without(names: &[String], of: &[String]) -> Vec<String> {
    let mut rest = names.to_vec();
    for n in of {
        if let Some(i) = rest.iter().position(|x| x == n) {
            rest.remove(i);
        }
    }
    rest
}

/// The parameters for which every instance of `domain` accesses, through `rel`, an element
/// within the inner extents of `array` (and `conds` hold), as ISL text; `None` when ISL
/// cannot say. As Polly words it: the complement of the parameters for which some instance
/// steps outside, local variables dropped (a smaller set, so a safe one).
fn in_bounds(isl: &Isl, rel: &str, domain: &str, array: &Array, conds: &[String]) -> Option<String> {
    let d = array.sizes.len();
    let mut params: Vec<String> = Vec::new();
    let mut outside: Vec<String> = Vec::new();
    for k in 1..d {
        let size = array.sizes[k].as_deref()?;
        let e = crate::maps::size_expr(size);
        if e.contains('{') {
            return None;
        }
        if let Some(p) = size.strip_prefix('[').and_then(|s| s.split_once(']')).map(|(p, _)| p) {
            params.extend(p.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()));
        }
        outside.push(format!("o{k} < 0 or o{k} >= {e}"));
    }
    params.sort();
    params.dedup();
    let vars: Vec<String> = (0..d).map(|k| format!("o{k}")).collect();
    let out = isl
        .set(&format!(
            "[{}] -> {{ {}[{}] : {} }}",
            params.join(", "),
            array.name,
            vars.join(", "),
            outside.join(" or ")
        ))
        .ok()?;
    let dom = isl.set(domain).ok()?;
    let bad = isl.map(rel).ok()?.intersect_domain(dom).ok()?.intersect_range(out).ok()?.params_set().ok()?;
    let mut inb = bad.remove_divs().ok()?.complement().ok()?;
    for c in conds {
        let names = names_in(c);
        let s = isl.set(&format!("[{}] -> {{ : {c} }}", names.join(", "))).ok()?;
        inb = inb.intersect(s).ok()?;
    }
    inb.to_text().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(name: &str, sizes: &[Option<&str>]) -> Array {
        Array {
            name: name.into(),
            base: "in".into(),
            element_size: 4,
            element_type: "float".into(),
            sizes: sizes.iter().map(|s| s.map(str::to_string)).collect(),
        }
    }

    #[test]
    fn a_loop_from_minus_r_is_moved_to_rows_and_columns() {
        let isl = Isl::new();
        let a = array("A", &[None, Some("[w] -> { [] -> [(w)] }")]);
        let c = Compound {
            name: "p_5".into(),
            terms: vec![(-1, vec!["R".into(), "w".into()]), (-1, vec!["R".into()])],
            conds: vec!["-2147483648 <= -1*R <= 2147483647".into()],
        };
        let rel = "[R, w, p_5] -> { S[i, j] -> A[i, p_5 + j] }";
        let moved = unfold(&isl, rel, &a, &c).expect("unfolded");
        let want = isl.map("[R, w] -> { S[i, j] -> A[i - R, j - R] }").unwrap();
        assert!(isl.map(&moved).unwrap().is_equal(&want).unwrap(), "{moved}");
        // Not divisible into affine parts: left alone.
        let c2 = Compound { terms: vec![(1, vec!["R".into(), "R".into()])], ..c.clone() };
        assert_eq!(unfold(&isl, rel, &a, &c2), None);
        // A relation without it: nothing to do.
        assert_eq!(unfold(&isl, "[w] -> { S[i, j] -> A[i, j] }", &a, &c), None);
    }

    #[test]
    fn three_dimensions_and_a_constant_extent() {
        let isl = Isl::new();
        let a = array("A", &[None, Some("[h] -> { [] -> [(h)] }"), Some("{ [] -> [(8)] }")]);
        // p = 2*h*8*s + 8*t + 3: two planes of s, t rows, 3 columns.
        let c = Compound {
            name: "p_1".into(),
            terms: vec![(16, vec!["h".into(), "s".into()]), (8, vec!["t".into()]), (3, vec![])],
            conds: vec![],
        };
        let moved = unfold(&isl, "[h, s, t, p_1] -> { S[i] -> A[i, 0, p_1 + i] }", &a, &c).unwrap();
        let want = isl.map("[h, s, t] -> { S[i] -> A[i + 2s, t, i + 3] }").unwrap();
        assert!(isl.map(&moved).unwrap().is_equal(&want).unwrap(), "{moved}");
    }

    #[test]
    fn in_bounds_is_where_no_instance_leaves_its_row() {
        let isl = Isl::new();
        let a = array("A", &[None, Some("[w] -> { [] -> [(w)] }")]);
        let inb = in_bounds(
            &isl,
            "[n, w] -> { S[i] -> A[0, i] }",
            "[n, w] -> { S[i] : 0 <= i < n }",
            &a,
            &["0 <= 1*w <= 4294967295".into()],
        )
        .unwrap();
        let want = isl.set("[n, w] -> { : (n <= 0 or w >= n) and w >= 0 and w <= 4294967295 }").unwrap();
        assert!(isl.set(&inb).unwrap().is_equal(&want).unwrap(), "{inb}");
    }
}
