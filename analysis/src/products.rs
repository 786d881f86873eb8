//! Products of the node's parameters as parameters of their own, which the runtime computes.
//!
//! ISL cannot multiply parameters, so Polly keeps a product of them (`blockDim.x *
//! gridDim.x`, the stride of data laid out one row per thread of the grid:
//! `rf[k * blockDim.x * gridDim.x + tid]`) as a parameter of its own, `p_N`. No launch can
//! give `p_N`, so maps naming it lost it (projected out): a write through it became "may or
//! may not be written" anywhere, and the node ran whole. Where `p_N` is a sum of products of
//! parameters the runtime knows (`(off + 1) * blockDim.x * gridDim.x` is `prod_bsx_gx +
//! prod_bsx_gx_off`), each product becomes a parameter of its own, recorded in the database
//! ([`dashdb::Product`]) for the runtime to give its factors' product at each launch, and
//! `p_N` is replaced by that sum: exactly, by ISL (the equality added, `p_N` projected out).
//!
//! Invariants:
//! - `p_N` is replaced only where its expansion is exact: a sum of integer multiples of
//!   known parameters and products of them, with no condition of narrow arithmetic attached
//!   (a product in 32-bit arithmetic is widened first, with its bound checked at each launch:
//!   `crate::widen`), and the same in every SCoP of the function that names it;
//! - it is replaced in every text of the SCoPs (contexts, domains, relations, in-bounds
//!   conditions) or in none, and then leaves the compound list: nothing downstream sees it.

use crate::polly::Scops;
use isl_glue::Isl;

/// Replaces each compound parameter of `scops` that is a sum of products of `known`
/// parameters (see the module's doc) and returns the products it named: (name, factors).
/// `known`: the parameters a launch gives one value each (not a block's id or offset, which
/// the runtime ranges over the blocks of a partition).
pub fn name(isl: &Isl, scops: &mut Scops, known: &[String]) -> Vec<(String, Vec<String>)> {
    let mut products: Vec<(String, Vec<String>)> = Vec::new();
    let compounds = scops.compound.clone();
    for c in &compounds {
        let exact = c.conds.is_empty()
            && c.terms.iter().all(|(_, f)| f.iter().all(|n| known.contains(n)))
            && c.terms.iter().any(|(_, f)| f.len() >= 2);
        // The same internal name for something else elsewhere: neither is certain.
        let ambiguous = compounds.iter().any(|d| d.name == c.name && d.terms != c.terms);
        if !exact || ambiguous || !scops.compound.iter().any(|d| d.name == c.name) {
            continue;
        }
        let mut named = products.clone();
        let mut sum: Vec<String> = Vec::new();
        let mut params = vec![c.name.clone()];
        for (coef, factors) in &c.terms {
            let term = match &factors[..] {
                [] => {
                    sum.push(coef.to_string());
                    continue;
                }
                [one] => one.clone(),
                _ => {
                    let mut to = format!("prod_{}", factors.join("_"));
                    while known.contains(&to) {
                        to.push('_');
                    }
                    if !named.iter().any(|(n, _)| n == &to) {
                        named.push((to.clone(), factors.clone()));
                    }
                    to
                }
            };
            sum.push(format!("{coef}*{term}"));
            if !params.contains(&term) {
                params.push(term);
            }
        }
        let equality = format!("[{}] -> {{ : {} = {} }}", params.join(", "), c.name, sum.join(" + "));
        if let Some(replaced) = substituted(isl, scops, &c.name, &equality) {
            *scops = replaced;
            scops.compound.retain(|d| d.name != c.name);
            products = named;
        }
    }
    products
}

/// Drops from every text of `scops` the parameters no text but the contexts constrains (the
/// contexts hold the bounds), and from `products`
/// those no text names. The shim bounds every block parameter of the wrapper for Polly (its
/// `bound_block_params`), which makes each one of Polly's parameters, used or not: without
/// this, every map would list `gx`, `bidy` and products nobody multiplies. A parameter some
/// text uses stays in all of them, as Polly gives them (the runtime fixes an argument's
/// parameters in each of its maps). `None` where ISL fails on a text (nothing changes then).
pub fn drop_unused(isl: &Isl, scops: &mut Scops) -> Option<()> {
    let mut out = scops.clone();
    let mut used: Vec<String> = Vec::new();
    let mut note = |names: Vec<String>| {
        for n in names {
            if !used.contains(&n) {
                used.push(n);
            }
        }
    };
    let texts = |s: &Scops| -> (Vec<String>, Vec<String>) {
        // Not the contexts: they bound every parameter, used or not.
        let mut sets: Vec<String> = s.assumed.iter().chain(&s.invalid).cloned().collect();
        sets.extend(s.statements.iter().map(|st| st.domain.clone()));
        sets.extend(s.accesses.iter().filter_map(|a| a.in_bounds.clone()));
        let maps = s
            .accesses
            .iter()
            .flat_map(|a| std::iter::once(a.relation.clone()).chain(a.through.iter().map(|t| t.relation.clone())));
        (sets, maps.collect())
    };
    let (sets, maps) = texts(&out);
    for t in &sets {
        note(isl.set(t).ok()?.drop_unused_params().ok()?.params().ok()?);
    }
    for t in &maps {
        note(isl.map(t).ok()?.drop_unused_params().ok()?.params().ok()?);
    }
    let set = |text: &mut String| -> Option<()> {
        let s = isl.set(text).ok()?;
        let unused: Vec<String> = s.params().ok()?.into_iter().filter(|p| !used.contains(p)).collect();
        if !unused.is_empty() {
            *text = s.project_out_params(&unused).ok()?.to_text().ok()?;
        }
        Some(())
    };
    let map = |text: &mut String| -> Option<()> {
        let mut m = isl.map(text).ok()?;
        let unused: Vec<String> = m.params().ok()?.into_iter().filter(|p| !used.contains(p)).collect();
        if !unused.is_empty() {
            for p in &unused {
                m = m.project_out_param(p).ok()?;
            }
            *text = m.to_text().ok()?;
        }
        Some(())
    };
    rewrite(&mut out, set, map)?;
    out.products.retain(|(n, _)| used.contains(n));
    *scops = out;
    Some(())
}

/// `scops` with the parameter `p` replaced in every text by what `equality` (a parameter
/// set) says it is; `None` where ISL fails on any text.
fn substituted(isl: &Isl, scops: &Scops, p: &str, equality: &str) -> Option<Scops> {
    let mut out = scops.clone();
    let uses = |text: &str| identifiers(text).any(|w| w == p);
    let set = |text: &mut String| -> Option<()> {
        if uses(text) {
            let s = isl.set(text).ok()?.intersect_params(isl.set(equality).ok()?).ok()?;
            *text = s.project_out_params(&[p.to_string()]).ok()?.to_text().ok()?;
        }
        Some(())
    };
    let map = |text: &mut String| -> Option<()> {
        if uses(text) {
            let m = isl.map(text).ok()?.intersect_params(isl.set(equality).ok()?).ok()?;
            *text = m.project_out_param(p).ok()?.to_text().ok()?;
        }
        Some(())
    };
    rewrite(&mut out, set, map)?;
    Some(out)
}

/// Rewrites every ISL text of `scops` in place: sets (contexts, assumptions, domains, the
/// accesses' bounds) with `set`, maps (accesses and what they go through) with `map`; `None`
/// at the first text either fails on.
fn rewrite(
    scops: &mut Scops,
    mut set: impl FnMut(&mut String) -> Option<()>,
    mut map: impl FnMut(&mut String) -> Option<()>,
) -> Option<()> {
    let Scops { contexts, assumed, invalid, statements, accesses, .. } = scops;
    for t in contexts.iter_mut().chain(assumed.iter_mut()).chain(invalid.iter_mut()) {
        set(t)?;
    }
    for s in statements.iter_mut() {
        set(&mut s.domain)?;
    }
    for a in accesses.iter_mut() {
        map(&mut a.relation)?;
        if let Some(t) = a.in_bounds.as_mut() {
            set(t)?;
        }
        if let Some(t) = a.through.as_mut() {
            map(&mut t.relation)?;
        }
    }
    Some(())
}

/// The identifiers of an ISL text: they start with a letter or `_` (in `2p_4`, a number
/// before one is its coefficient).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let start = rest.find(|c: char| c.is_ascii_alphanumeric() || c == '_')?;
        let tail = &rest[start..];
        let len = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let word = &tail[..len];
        rest = &tail[len..];
        let word = word.trim_start_matches(|c: char| c.is_ascii_digit());
        if !word.is_empty() {
            return Some(word);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::polly::{Access, AccessKind, Compound, Statement};

    fn compound(name: &str, terms: Vec<(i64, Vec<&str>)>, conds: &[&str]) -> Compound {
        Compound {
            name: name.into(),
            terms: terms.into_iter().map(|(c, n)| (c, n.into_iter().map(String::from).collect())).collect(),
            conds: conds.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn scops(compounds: Vec<Compound>) -> Scops {
        let params = "[bsx, boffx, p_4, p_40]";
        Scops {
            contexts: vec![format!("{params} -> {{ : p_4 >= 0 and p_40 >= 0 }}")],
            compound: compounds,
            statements: vec![Statement {
                name: "S".into(),
                domain: format!("{params} -> {{ S[i] : 0 <= i < bsx }}"),
                loops: vec!["t0".into()],
                region: false,
            }],
            accesses: vec![Access {
                statement: "S".into(),
                kind: AccessKind::MustWrite,
                affine: true,
                relation: format!("{params} -> {{ S[i] -> RF[2p_4 + p_40 + boffx + i] }}"),
                location: "k.cu:3".into(),
                approximate: false,
                loosened: false,
                through: None,
                through_later: false,
                data_dependent: false,
                in_bounds: None,
            }],
            ..Scops::default()
        }
    }

    #[test]
    fn products_of_known_parameters_replace_the_compound_everywhere() {
        let isl = Isl::new();
        let known: Vec<String> = ["bsx", "gx", "boffx", "off", "n"].iter().map(|s| s.to_string()).collect();
        let mut s = scops(vec![
            compound("p_4", vec![(1, vec!["bsx", "gx"])], &[]),
            // `(off + 1) * bsx * gx`: a sum of two products.
            compound("p_40", vec![(1, vec!["bsx", "gx"]), (1, vec!["bsx", "gx", "off"])], &[]),
            // Left: a narrow condition, an unknown name, no product at all.
            compound("p_6", vec![(1, vec!["n", "n"])], &["0 <= n <= 65535"]),
            compound("p_7", vec![(1, vec!["bsx", "w"])], &[]),
            compound("p_8", vec![(2, vec!["n"]), (1, vec![])], &[]),
        ]);
        let named = name(&isl, &mut s, &known);
        let text = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            named,
            vec![
                ("prod_bsx_gx".to_string(), text(&["bsx", "gx"])),
                ("prod_bsx_gx_off".to_string(), text(&["bsx", "gx", "off"]))
            ]
        );
        // RF[2 p_4 + p_40 + boffx + i] = RF[3 prod_bsx_gx + prod_bsx_gx_off + boffx + i].
        let rel = &s.accesses[0].relation;
        assert!(!identifiers(rel).any(|w| w == "p_4" || w == "p_40"), "{rel}");
        let want =
            "[bsx, boffx, prod_bsx_gx, prod_bsx_gx_off] -> { S[i] -> RF[3prod_bsx_gx + prod_bsx_gx_off + boffx + i] }";
        assert!(isl.map(rel).unwrap().is_equal(&isl.map(want).unwrap()).unwrap(), "{rel}");
        assert!(!identifiers(&s.contexts[0]).any(|w| w == "p_4"), "{}", s.contexts[0]);
        assert!(!identifiers(&s.statements[0].domain).any(|w| w == "p_4"), "{}", s.statements[0].domain);
        let left: Vec<&str> = s.compound.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(left, ["p_6", "p_7", "p_8"]);
    }

    #[test]
    fn a_name_two_scops_use_for_different_products_is_left() {
        let isl = Isl::new();
        let known: Vec<String> = ["bsx", "gx", "n"].iter().map(|s| s.to_string()).collect();
        let mut s = scops(vec![
            compound("p_4", vec![(1, vec!["bsx", "gx"])], &[]),
            compound("p_4", vec![(1, vec!["n", "gx"])], &[]),
        ]);
        assert!(name(&isl, &mut s, &known).is_empty());
        assert!(s.accesses[0].relation.contains("2p_4"));
    }

    #[test]
    fn identifiers_are_whole_and_skip_coefficients() {
        let words: Vec<&str> = identifiers("[p_4] -> { S[i] -> A[2p_4 + xp_4 + 10] : a2p_4 >= 0 }").collect();
        assert_eq!(words, ["p_4", "S", "i", "A", "p_4", "xp_4", "a2p_4"]);
    }
}
