use super::*;

fn runs(isl: &Isl, text: &str, shape: &[i64]) -> Vec<(i64, i64)> {
    isl.set(text).unwrap().runs(shape).unwrap().iter().map(|r| (r.start, r.end)).collect()
}

#[test]
fn matmul_row_block_reads_contiguous_rows() {
    let isl = Isl::new();
    let a = isl.map("[N] -> { I[x, y] -> A[y, k] : 0 <= x < N and 0 <= y < N and 0 <= k < N }").unwrap();
    let part = a.fix_params(&[("N", 8)]).unwrap().restrict_to_box(&[0, 2], &[8, 4]).unwrap().range().unwrap();
    assert_eq!(part.runs(&[8, 8]).unwrap(), vec![Run { start: 16, end: 32 }]);
    assert_eq!(
        part.rectangles(&[8, 8]).unwrap(),
        vec![Rect { first_row: 2, rows: 2, first_col: 0, cols: 8, row_len: 8 }]
    );
}

#[test]
fn matmul_column_block_reads_a_rectangle() {
    let isl = Isl::new();
    let b = isl.map("[N] -> { I[x, y] -> B[k, x] : 0 <= x < N and 0 <= y < N and 0 <= k < N }").unwrap();
    let part = b.fix_params(&[("N", 8)]).unwrap().restrict_to_box(&[0, 0], &[2, 8]).unwrap().range().unwrap();
    assert_eq!(
        part.rectangles(&[8, 8]).unwrap(),
        vec![Rect { first_row: 0, rows: 8, first_col: 0, cols: 2, row_len: 8 }]
    );
    let runs = part.runs(&[8, 8]).unwrap();
    assert_eq!(runs.len(), 8);
    assert_eq!(runs[3], Run { start: 24, end: 26 });
}

#[test]
fn stencil_interior_and_cross() {
    let isl = Isl::new();
    let write = isl.map("[N] -> { I[x, y] -> out[y, x] : 0 < x < N - 1 and 0 < y < N - 1 }").unwrap();
    let w = write.fix_params(&[("N", 6)]).unwrap().range().unwrap();
    assert_eq!(w.rectangles(&[6, 6]).unwrap(), vec![Rect { first_row: 1, rows: 4, first_col: 1, cols: 4, row_len: 6 }]);
    // The 5-point reads of the interior: the whole array but its four corners.
    let read = isl
        .map("[N] -> { I[x, y] -> in[a, b] : 0 < x < N - 1 and 0 < y < N - 1 and exists (dx, dy : a = y + dy and b = x + dx and -1 <= dx + dy <= 1 and -1 <= dx - dy <= 1) }")
        .unwrap();
    let r = read.fix_params(&[("N", 6)]).unwrap().range().unwrap();
    let all: i64 = r.rectangles(&[6, 6]).unwrap().iter().map(Rect::elements).sum();
    assert_eq!(all, 36 - 4);
    assert!(!r.contains(&[0, 0]).unwrap() && r.contains(&[0, 1]).unwrap());
}

#[test]
fn strided_sets_are_exact() {
    let isl = Isl::new();
    assert_eq!(runs(&isl, "{ A[i] : 0 <= i < 10 and i mod 3 = 0 }", &[10]), vec![(0, 1), (3, 4), (6, 7), (9, 10)]);
    // Elements 0, 2, 5, 7, 8, 10: 7 and 8 are adjacent in memory, one run.
    assert_eq!(
        runs(&isl, "{ A[i, j] : 0 <= i < 3 and 0 <= j < 4 and (i + j) mod 2 = 0 }", &[3, 4]),
        vec![(0, 1), (2, 3), (5, 6), (7, 9), (10, 11)]
    );
}

#[test]
fn set_algebra() {
    let isl = Isl::new();
    let a = isl.set("{ A[i] : 0 <= i < 10 }").unwrap();
    let b = isl.set("{ A[i] : 3 <= i < 5 }").unwrap();
    let d = a.copy().unwrap().subtract(b.copy().unwrap()).unwrap();
    assert_eq!(d.runs(&[10]).unwrap(), vec![Run { start: 0, end: 3 }, Run { start: 5, end: 10 }]);
    assert!(b.is_subset(&a).unwrap());
    assert!(d.copy().unwrap().intersect(b).unwrap().is_empty().unwrap());
    let whole = d.union(isl.set("{ A[i] : 3 <= i < 5 }").unwrap()).unwrap();
    assert!(whole.is_equal(&a).unwrap());
}

#[test]
fn errors_are_reported_not_guessed() {
    let isl = Isl::new();
    assert!(matches!(isl.map("{ not isl"), Err(Error::Parse { .. })));
    let m = isl.map("[N] -> { I[x] -> A[x] : 0 <= x < N }").unwrap();
    assert!(matches!(m.fix_params(&[("M", 3)]), Err(Error::UnknownParam(p)) if p == "M"));
    // N not fixed: the element set is unbounded.
    let m = isl.map("[N] -> { I[x] -> A[x] : 0 <= x < N }").unwrap();
    assert!(matches!(m.range().unwrap().runs(&[10]), Err(Error::Unbounded(_))));
    let m = isl.map("{ I[x] -> A[x] }").unwrap();
    assert!(matches!(m.restrict_to_box(&[0, 0], &[1, 1]), Err(Error::Shape(_))));
}

/// A tiny deterministic generator: the property tests see the same cases every run.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, bound: i64) -> i64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % bound as u64) as i64
    }
}

#[test]
fn runs_match_brute_force_on_generated_sets() {
    let isl = Isl::new();
    let mut g = Lcg(7);
    for case in 0..120 {
        let (rows, cols) = (1 + g.next(7), 1 + g.next(9));
        let mut parts = Vec::new();
        for _ in 0..1 + g.next(3) {
            let (r0, c0) = (g.next(rows), g.next(cols));
            let (r1, c1) = (r0 + g.next(rows - r0 + 1), c0 + g.next(cols - c0 + 1));
            let stride =
                if g.next(4) == 0 { format!(" and (i + 2 * j) mod {} = 0", 2 + g.next(2)) } else { String::new() };
            parts.push(format!("{r0} <= i < {r1} and {c0} <= j < {c1}{stride}"));
        }
        let text =
            format!("{{ A[i, j] : {} }}", parts.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" or "));
        let set = isl.set(&text).unwrap();
        let got = set.runs(&[rows, cols]).unwrap();
        // Brute force: every element tested.
        let mut want: Vec<Run> = Vec::new();
        for i in 0..rows {
            for j in 0..cols {
                if set.contains(&[i, j]).unwrap() {
                    let at = i * cols + j;
                    match want.last_mut() {
                        Some(r) if r.end == at => r.end += 1,
                        _ => want.push(Run { start: at, end: at + 1 }),
                    }
                }
            }
        }
        assert_eq!(got, want, "case {case}: {text} over {rows}x{cols}");
        let rect_total: i64 = set.rectangles(&[rows, cols]).unwrap().iter().map(Rect::elements).sum();
        assert_eq!(
            rect_total,
            want.iter().map(|r| r.end - r.start).sum::<i64>(),
            "case {case}: rectangles overlap or miss"
        );
    }
}

#[test]
fn a_deliberately_wrong_decomposition_is_caught() {
    // The brute-force comparison above must be able to fail: a set and a different one.
    let isl = Isl::new();
    let s = isl.set("{ A[i, j] : 0 <= i < 3 and 0 <= j < 3 }").unwrap();
    let wrong = isl.set("{ A[i, j] : 0 <= i < 3 and 0 <= j < 2 }").unwrap();
    assert_ne!(s.runs(&[3, 3]).unwrap(), wrong.runs(&[3, 3]).unwrap());
}

#[test]
fn values_of_expressions_and_parameter_conditions() {
    let isl = Isl::new();
    assert_eq!(isl.value_of("floor(w / 16) * 16", &[("w", 70), ("h", 3)]).unwrap(), 64);
    assert_eq!(isl.value_of("16", &[]).unwrap(), 16);
    // A name without a value is refused before ISL, which would print a syntax error.
    assert!(matches!(isl.value_of("w", &[]), Err(Error::UnknownParam(p)) if p == "w"));
    assert!(matches!(isl.value_of("2Lx + 1", &[("Ly", 3)]), Err(Error::UnknownParam(p)) if p == "Lx"));
    assert_eq!(isl.value_of("2n + 1", &[("n", 3)]).unwrap(), 7);
    assert_eq!(isl.value_of("max(n, 4) - floor(n / 2)", &[("n", 3)]).unwrap(), 3);
    assert!(isl.params_hold("[gx, n] -> { : gx >= 0 and n >= 16gx }", &[("gx", 2), ("n", 32), ("m", 1)]).unwrap());
    assert!(!isl.params_hold("[gx, n] -> { : gx >= 0 and n >= 16gx }", &[("gx", 3), ("n", 32)]).unwrap());
    // A parameter left free would answer for some value of it: refused.
    assert!(
        matches!(isl.params_hold("[gx, n] -> { : n >= 16gx }", &[("n", 32)]), Err(Error::UnknownParam(p)) if p == "gx")
    );
}

fn blocks(size: i64, lo: i64, hi: i64) -> Vec<BlockRange> {
    vec![BlockRange { id: "bidx".into(), offset: "boffx".into(), size, lo, hi }]
}

#[test]
fn a_run_time_block_size_is_exact_over_a_range_of_blocks() {
    let isl = Isl::new();
    // One block of `bsx` threads: instance x = boffx + t reads in[x - 1 .. x + 1] and writes
    // out[bidx], the block's own element, and tmp[x - boffx], its thread id.
    let read = isl.map("[n, boffx, bsx] -> { I[x] -> in[e] : boffx <= x < boffx + bsx and x < n and x - 1 <= e <= x + 1 and 0 <= e < n }").unwrap();
    let part = read.fix_params(&[("n", 100), ("bsx", 16)]).unwrap().over_blocks(&blocks(16, 2, 4)).unwrap();
    let r = part.restrict_to_box(&[32], &[64]).unwrap().range().unwrap().runs(&[0]).unwrap();
    assert_eq!(r, vec![Run { start: 31, end: 65 }]);
    let per_block = isl.map("[bidx, boffx, bsx] -> { I[x] -> out[bidx] : boffx <= x < boffx + bsx }").unwrap();
    let w = per_block.fix_params(&[("bsx", 16)]).unwrap().over_blocks(&blocks(16, 2, 5)).unwrap();
    assert_eq!(
        w.restrict_to_box(&[32], &[80]).unwrap().range().unwrap().runs(&[0]).unwrap(),
        vec![Run { start: 2, end: 5 }]
    );
    // Instance 40 alone (block 2, thread 8) writes exactly tmp[8].
    let thread = isl.map("[boffx, bsx] -> { I[x] -> tmp[x - boffx] : boffx <= x < boffx + bsx }").unwrap();
    let t = thread.fix_params(&[("bsx", 16)]).unwrap().over_blocks(&blocks(16, 0, 7)).unwrap();
    assert_eq!(
        t.restrict_to_box(&[40], &[41]).unwrap().range().unwrap().runs(&[0]).unwrap(),
        vec![Run { start: 8, end: 9 }]
    );
}

#[test]
fn assumptions_must_hold_for_every_block() {
    let isl = Isl::new();
    // An `int` index: valid while boffx + bsx stays below 2^31 (here, below 1000).
    let cond = "[boffx, bsx, n] -> { : boffx + bsx <= 1000 and n > 0 }";
    assert!(isl.params_hold_for_blocks(cond, &[("bsx", 100), ("n", 5)], &blocks(100, 0, 10)).unwrap());
    assert!(!isl.params_hold_for_blocks(cond, &[("bsx", 100), ("n", 5)], &blocks(100, 0, 11)).unwrap());
    assert!(!isl.params_hold_for_blocks(cond, &[("bsx", 100), ("n", 0)], &blocks(100, 0, 1)).unwrap());
    assert!(matches!(
        isl.params_hold_for_blocks(cond, &[("bsx", 100)], &blocks(100, 0, 1)),
        Err(Error::UnknownParam(p)) if p == "n"
    ));
}

#[test]
fn too_fragmented_sets_give_up_instead_of_taking_minutes() {
    let isl = Isl::new();
    // Every other element of a million: half a million intervals.
    let strided = isl.set("{ A[i] : 0 <= i < 1000000 and i mod 2 = 0 }").unwrap();
    assert!(matches!(strided.rectangles(&[0]), Err(Error::TooComplex)));
    // A few hundred are listed.
    let small = isl.set("{ A[i] : 0 <= i < 600 and i mod 2 = 0 }").unwrap();
    assert_eq!(small.runs(&[0]).unwrap().len(), 300);
}

/// Parboil lbm's shape: 19 planes of a `[*][120][128]` grid (constant extents, so the index
/// stays linear), each written over whole rows of 120 of 128 columns.
const LBM_WRITE: &str = "[boffx, bsx, gy, bidx] -> { I[x, y] -> dst[30720 - boffx + 128bidx + x + 15360y] : \
    boffx <= x < boffx + bsx and 0 <= y < gy; I[x, y] -> dst[2396160 - boffx + 128bidx + x + 15360y] : \
    boffx <= x < boffx + bsx and 0 <= y < gy }";

#[test]
fn constant_strides_are_found_and_delinearized_exactly() {
    let isl = Isl::new();
    let m = isl.map(LBM_WRITE).unwrap();
    assert_eq!(m.index_strides().unwrap(), vec![128, 15360]);
    let d = m.copy().unwrap().delinearize(&[120, 128]).unwrap();
    // The same elements, linearized back, for one launch's values.
    let values = [("boffx", 0), ("bsx", 120), ("gy", 3), ("bidx", 5)];
    let linear = m.fix_params(&values).unwrap().range().unwrap();
    let planes = d.fix_params(&values).unwrap().range().unwrap();
    let a: Vec<Run> = linear.runs(&[1 << 40]).unwrap();
    assert!(linear.local_vars().unwrap() > 0);
    assert_eq!(planes.local_vars().unwrap(), 0, "{}", planes.to_text().unwrap());
    let b: Vec<Run> = planes.runs(&[1 << 20, 120, 128]).unwrap();
    assert_eq!(a, b);
    assert_eq!(b.len(), 6);
}

#[test]
fn delinearizing_a_misaligned_index_stays_exact() {
    let isl = Isl::new();
    // x - 1 reaches into the previous row: a carry the local variables express.
    let m = isl.map("[n] -> { I[x, y] -> a[128y + x - 1] : 0 <= x < 120 and 0 <= y < n }").unwrap();
    let d = m.copy().unwrap().delinearize(&[128]).unwrap();
    let linear = m.fix_params(&[("n", 4)]).unwrap().range().unwrap().runs(&[1 << 20]).unwrap();
    let rows = d.fix_params(&[("n", 4)]).unwrap().range().unwrap().runs(&[1 << 20, 128]).unwrap();
    assert_eq!(linear, rows);
}

/// A condition on a parameter nobody can give must hold for every value of it in its range:
/// `a >= q` for every q of 0..=10 is `a >= 10`; a way out that needs some q is no way out;
/// without a range, `a >= q` holds for no `a`.
#[test]
fn conditions_hold_for_every_value_of_an_unknown_parameter() {
    let isl = Isl::new();
    let q = ["q".to_string()];
    let range = || Some(isl.set("[q] -> { : 0 <= q <= 10 }").unwrap());
    let all = isl.set("[a, q] -> { : a >= q }").unwrap().for_all_params(&q, range()).unwrap();
    let want = isl.set("[a] -> { : a >= 10 }").unwrap();
    assert!(all.is_equal(&want).unwrap(), "{}", all.to_text().unwrap());
    let either = isl.set("[a, q] -> { : a >= 0 or q > 5 }").unwrap().for_all_params(&q, range()).unwrap();
    assert!(either.is_equal(&isl.set("[a] -> { : a >= 0 }").unwrap()).unwrap(), "{}", either.to_text().unwrap());
    let unbounded = isl.set("[a, q] -> { : a >= q }").unwrap().for_all_params(&q, None).unwrap();
    assert!(unbounded.is_empty().unwrap());
    // Forgetting instead keeps every value some q allows.
    let some = isl.set("[a, q] -> { : a >= q and 0 <= q <= 10 }").unwrap().project_out_params(&q).unwrap();
    assert!(some.is_equal(&isl.set("[a] -> { : a >= 0 }").unwrap()).unwrap());
}

#[test]
fn bound_parameters_read_back() {
    for k in [0, 1, 2, 17] {
        for upper in [false, true] {
            assert_eq!(bound_param(&box_param(k, upper)), Some(Bound::Box { dim: k, upper }));
            assert_eq!(bound_param(&block_param(k, upper)), Some(Bound::Blocks { range: k, upper }));
        }
    }
    assert_eq!(bound_param("hpvm_b"), None);
    assert_eq!(bound_param("boffx"), None);
    assert_eq!(bound_param("hpvm_lox"), None);
}

/// Deterministic pseudo-random numbers (xorshift) for the property tests below.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as i64
    }
}

/// A closed form evaluates to what ISL computes with every parameter fixed: the same
/// rectangles where it says it is exact, a box holding them where not; empty where ISL finds
/// nothing. Maps of the shapes kernels have (Gaussian elimination's row and column updates
/// with a run-time block size, a stencil's cross, a clamped read, a strided write).
#[test]
fn closed_boxes_agree_with_isl_for_every_value() {
    let isl = Isl::new();
    let fan2 = "[boffx, boffy, bsy, bsx, t, size] -> { I[x, y] -> a[1 + t + y, t + x] : boffx <= x < -t + size and x < boffx + bsx and boffy <= y <= -2 - t + size and y < boffy + bsy }";
    let fan2_reads = "[boffx, boffy, bsy, bsx, t, size] -> { I[x, y] -> a[1 + t + y, t + x] : boffx <= x < -t + size and x < boffx + bsx and boffy <= y <= -2 - t + size and y < boffy + bsy; I[x, y] -> a[t, t + x] : boffx <= x < -t + size and x < boffx + bsx and boffy <= y <= -2 - t + size and y < boffy + bsy }";
    let cross = "[N] -> { I[x, y] -> in[a, b] : 0 < x < N - 1 and 0 < y < N - 1 and exists (dx, dy : a = y + dy and b = x + dx and -1 <= dx + dy <= 1 and -1 <= dx - dy <= 1) }";
    let clamped = "[N] -> { I[x] -> v[o] : 0 <= x < N and (o = x + 1 and x < N - 1 or o = N - 1 and x = N - 1) }";
    let strided = "[N] -> { I[x] -> v[2x] : 0 <= x < N }";
    let blocks = |n: usize| -> Vec<BlockRange> {
        [("boffx", "bidx"), ("boffy", "bidy")][..n]
            .iter()
            .map(|(off, id)| BlockRange { id: id.to_string(), offset: off.to_string(), size: 4, lo: 0, hi: 0 })
            .collect()
    };
    let cases: [(&str, usize, bool); 5] =
        [(fan2, 2, true), (fan2_reads, 2, true), (cross, 0, false), (clamped, 0, true), (strided, 0, false)];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (text, nb, exact) in cases {
        let map = isl.map(text).unwrap();
        // The block-id parameters the ranges stand for, as the runtime's maps name them.
        let ranged = blocks(nb).into_iter().map(|b| BlockRange { id: b.id.clone(), ..b }).collect::<Vec<_>>();
        let map =
            if nb > 0 { isl.map(&text.replace("boffx, boffy", "boffx, boffy, bidx, bidy")).unwrap() } else { map };
        let sizes: Vec<(&str, i64)> = [("bsx", 4), ("bsy", 4)]
            .into_iter()
            .filter(|(n, _)| map.params().unwrap().iter().any(|p| p == n))
            .collect();
        let dims = map.input_dims().unwrap();
        // Dimensions without ranged blocks are cut by the box.
        let boxed: Vec<usize> = (nb..dims).collect();
        let t0 = std::time::Instant::now();
        let closed = map.closed_box(&sizes, &ranged, &boxed).unwrap();
        eprintln!("{:?} for {text}", t0.elapsed());
        assert_eq!(closed.exact, exact, "{text}");
        for _ in 0..60 {
            let n = 2 + rng.below(14);
            let t = rng.below(n);
            // Boxes of instances, which never lie at negative coordinates.
            let mut lo: Vec<i64> = (0..dims).map(|_| rng.below(n + 2)).collect();
            let mut hi: Vec<i64> = lo.iter().map(|&l| l + rng.below(n)).collect();
            // Ranged dimensions (blocks of 4): the instances of their blocks.
            let b: Vec<BlockRange> = ranged
                .iter()
                .enumerate()
                .map(|(k, r)| {
                    let (blo, bhi) = (lo[k].div_euclid(4).max(0), (hi[k] + 3).div_euclid(4).max(0));
                    (lo[k], hi[k]) = (blo * 4, bhi * 4);
                    BlockRange { lo: blo, hi: bhi, ..r.clone() }
                })
                .collect();
            let mut fixed: Vec<(&str, i64)> = vec![("N", n), ("size", n), ("t", t), ("bsx", 4), ("bsy", 4)];
            fixed.retain(|(name, _)| map.params().unwrap().iter().any(|p| p == name));
            let shape = vec![n + 2; map.output_dims().unwrap()];
            let concrete = map
                .copy()
                .unwrap()
                .fix_params(&fixed)
                .unwrap()
                .over_blocks(&b)
                .unwrap()
                .restrict_to_box(&lo, &hi)
                .unwrap()
                .range()
                .unwrap();
            let truth = concrete.rectangles(&shape).unwrap();
            let value = |name: &str| -> Option<i64> {
                if let Some(&(_, v)) = fixed.iter().find(|(m, _)| *m == name) {
                    return Some(v);
                }
                (0..dims)
                    .find_map(|d| {
                        (box_param(d, false) == name).then_some(lo[d]).or((box_param(d, true) == name).then_some(hi[d]))
                    })
                    .or_else(|| {
                        (0..b.len()).find_map(|k| {
                            (block_param(k, false) == name)
                                .then_some(b[k].lo)
                                .or((block_param(k, true) == name).then_some(b[k].hi))
                        })
                    })
            };
            let values = closed.params().values(value).unwrap();
            let boxes = closed.eval(&values).unwrap();
            // The elements of the boxes, and ISL's, one by one (the arrays are small).
            let elements = |rects: &[Rect]| -> std::collections::BTreeSet<i64> {
                rects
                    .iter()
                    .flat_map(|r| {
                        (r.first_row..r.first_row + r.rows)
                            .flat_map(move |row| (r.first_col..r.first_col + r.cols).map(move |c| row * r.row_len + c))
                    })
                    .collect()
            };
            let mine: Vec<Rect> = boxes.iter().flat_map(|b| box_rects(b, &shape).unwrap()).collect();
            let (mine, truth) = (elements(&mine), elements(&truth));
            if exact {
                assert_eq!(mine, truth, "{text} at {fixed:?} {lo:?}..{hi:?}: {boxes:?}");
            } else {
                assert!(mine.is_superset(&truth), "{text} at {fixed:?} {lo:?}..{hi:?}: {boxes:?}");
            }
        }
    }
}

/// A closed condition answers what ISL answers with the values fixed, for conditions of the
/// shapes the analysis writes: bounds on scalars, a stride, and one quantified over every
/// block of a range.
#[test]
fn closed_conditions_agree_with_isl_for_every_value() {
    let isl = Isl::new();
    let plain = ["[t, size] -> { : t >= 0 and size > t }", "[n, k] -> { : (n mod 4) = 0 and k < n - 2 or k = 7 }"];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for text in plain {
        let names = isl.set(text).unwrap().params().unwrap();
        let closed = isl.closed_cond(text, &[], &[]).unwrap();
        for _ in 0..200 {
            let values: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), rng.below(40) - 10)).collect();
            let v = closed.params().values(|n| values.iter().find(|(m, _)| *m == n).map(|(_, v)| *v)).unwrap();
            assert_eq!(closed.eval(&v).unwrap(), isl.params_hold(text, &values).unwrap(), "{text} at {values:?}");
        }
    }
    let blocked = "[boffx, t] -> { : boffx <= 40 and -t <= boffx }";
    let blocks = [BlockRange { id: "bidx".into(), offset: "boffx".into(), size: 8, lo: 0, hi: 0 }];
    let text = blocked.replace("[boffx, t]", "[boffx, bidx, t]");
    // `t` fixed to 3 in the closed form; the block range's bounds stay parameters.
    let closed = isl.closed_cond(&text, &[("t", 3)], &blocks).unwrap();
    for _ in 0..200 {
        // Block ids are never negative; a range may be empty.
        let (lo, hi) = (rng.below(8), rng.below(10) - 2);
        let b = [BlockRange { lo, hi, ..blocks[0].clone() }];
        let v = closed
            .params()
            .values(|n| match bound_param(n) {
                Some(Bound::Blocks { upper, .. }) => Some(if upper { hi } else { lo }),
                _ => (n == "t").then_some(3),
            })
            .unwrap();
        let truth = isl.params_hold_for_blocks(&text, &[("t", 3)], &b).unwrap();
        assert_eq!(closed.eval(&v).unwrap(), truth, "blocks {lo}..{hi}");
    }
}

#[test]
fn a_budget_of_operations_stops_isl_and_says_so() {
    let isl = Isl::new();
    let text = "[N] -> { I[x, y] -> A[y, k] : 0 <= x < N and 0 <= y < N and 0 <= k < N }";
    let work = |isl: &Isl| -> Result<Vec<Run>> {
        let m = isl.map(text)?;
        m.fix_params(&[("N", 64)])?.restrict_to_box(&[0, 2], &[64, 40])?.range()?.runs(&[64, 64])
    };
    // Unbounded, and generously bounded: the work is done, and no bound was passed.
    let (free, passed) = isl.within(0, || work(&isl));
    assert_eq!(free.unwrap(), vec![Run { start: 128, end: 2560 }]);
    assert!(!passed);
    let (roomy, passed) = isl.within(10_000_000, || work(&isl));
    assert_eq!(roomy.unwrap(), vec![Run { start: 128, end: 2560 }]);
    assert!(!passed);
    // A bound of a few operations: the work fails, and the caller learns why.
    for tiny in [1, 10, 100] {
        let (short, passed) = isl.within(tiny, || work(&isl));
        assert!(short.is_err() && passed, "{tiny}: {short:?} {passed}");
    }
    // The context is whole again afterwards.
    assert_eq!(work(&isl).unwrap(), vec![Run { start: 128, end: 2560 }]);
}

#[test]
fn the_outermost_moved_output_is_found_through_integer_divisions() {
    let isl = Isl::new();
    // Row-major out[y][x] written by I[x, y]: a step in y moves the row, one in x the column.
    let m = isl.map("[n] -> { I[x, y] -> out[y, x] : 0 <= x < n and 0 <= y < n }").unwrap();
    assert_eq!(m.outermost_moved(0).unwrap(), Some(1));
    assert_eq!(m.outermost_moved(1).unwrap(), Some(0));
    // A table indexed by (i / 20) % 30 (analysed in seconds, not minutes): a step in x moves
    // it (sometimes), one in y never does.
    let t = isl.map("[n] -> { I[x, y] -> t[(floor(x / 20)) mod 30] : 0 <= x < n and 0 <= y < 4 }").unwrap();
    assert_eq!(t.outermost_moved(0).unwrap(), Some(0));
    assert_eq!(t.outermost_moved(1).unwrap(), None);
    // Moving only backwards still moves: a reversed index.
    let r = isl.map("[n] -> { I[x] -> r[n - x] : 0 <= x < n }").unwrap();
    assert_eq!(r.outermost_moved(0).unwrap(), Some(0));
}

/// Block ranges and parameter values built through ISL's API are the sets their text reads
/// as, values past 32 bits and empty ranges included.
#[test]
fn sets_built_without_the_parser_equal_their_text() {
    let isl = Isl::new();
    let blocks = [
        BlockRange { id: "bx".into(), offset: "ox".into(), size: 256, lo: 3, hi: 9 },
        BlockRange { id: "by".into(), offset: "oy".into(), size: 4, lo: 0, hi: 1 << 33 },
    ];
    let built = isl.block_ranges(&blocks).unwrap();
    let parsed = isl.parsed_set(&block_ranges_text(&blocks)).unwrap();
    assert!(built.is_equal(&parsed).unwrap());
    let empty = [BlockRange { id: "bx".into(), offset: "ox".into(), size: 8, lo: 5, hi: 5 }];
    assert!(isl.block_ranges(&empty).unwrap().is_empty().unwrap());
    let values = [("n", 4096), ("big", 5_000_000_000), ("neg", -7)];
    let built = isl.param_values(&values).unwrap();
    let parsed = isl.parsed_set("[n, big, neg] -> { : n = 4096 and big = 5000000000 and neg = -7 }").unwrap();
    assert!(built.is_equal(&parsed).unwrap());
    assert!(isl.param_values(&[]).unwrap().is_equal(&isl.parsed_set("[] -> { : }").unwrap()).unwrap());
}

/// A row of a flat array, `A[k * n + x]` for `k < x < n`, as Polly delinearizes it (the row
/// is the division `(k * n + x) / n`): its closed form over blocks is exact, since block ids
/// and instances are never negative, so the division is `k` alone. Without that, every plan
/// of a Gaussian elimination's row (PolyBench's lu, 2048 launches) asked ISL again.
#[test]
fn a_row_of_a_flat_array_has_an_exact_closed_form() {
    let isl = Isl::new();
    let text = "[boffx, boffy, boffz, bsy, bsx, k, n, bsz] -> { I[x, y, z] -> A[o0, o1 = 2048k + x - 2048o0] : \
                x >= boffx and k < x < n and x < boffx + bsx and boffy <= y < boffy + bsy and \
                boffz <= z < boffz + bsz and -2047 + 2048k + x <= 2048o0 <= 2048k + x }";
    let m = isl.map(text).unwrap();
    let blocks = [BlockRange { id: "bx".into(), offset: "boffx".into(), size: 256, lo: 0, hi: 8 }];
    let fixed = [("bsy", 1), ("bsx", 256), ("n", 2048), ("bsz", 1)];
    let closed = m.closed_box(&fixed, &blocks, &[1, 2]).unwrap();
    assert!(closed.exact);
}
