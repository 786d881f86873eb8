//! The segments of a coherence map (`coherence.rs`): one sequence, stored as chunks that
//! clones share until one of them is written. Generic over what it holds, so this file
//! names no other.
//!
//! A map is kept as it was before a launch (the copy-plan cache's states, the copy planner's
//! sources) while the launch changes it. With one shared vector, the first change after such
//! a clone copied every segment, and a splice moved every segment after it: a Gaussian
//! elimination's maps hold thousands (each row carries pieces of several devices' writes), and
//! copying them was most of a launch's copy planning. With chunks, a change copies the
//! chunks it touches and moves the segments of those only.
//!
//! Invariants:
//! - No chunk is empty, and none holds more than [`CHUNK`] segments.
//! - `starts[c]` is the number of segments before chunk `c`; `len` is their total.
//! - Positions are indices into the whole sequence, as if it were one slice.

use std::ops::Range;
use std::sync::Arc;

/// Segments per chunk, at most: small enough that a change copies little, large enough that
/// a search over the chunks is short. Tests use small chunks, so that the coherence maps'
/// own tests cross chunks too.
#[cfg(not(test))]
const CHUNK: usize = 128;
#[cfg(test)]
const CHUNK: usize = 4;

/// A position in a [`Segments`]: its chunk and the place in it (the start is the default).
/// Valid until the sequence is next changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    chunk: usize,
    k: usize,
}

#[derive(Clone, Debug)]
pub struct Segments<T> {
    chunks: Vec<Arc<Vec<T>>>,
    starts: Vec<usize>,
    len: usize,
}

impl<T> Default for Segments<T> {
    fn default() -> Segments<T> {
        Segments { chunks: Vec::new(), starts: Vec::new(), len: 0 }
    }
}

impl<T: Clone + PartialEq> PartialEq for Segments<T> {
    fn eq(&self, other: &Segments<T>) -> bool {
        if self.len != other.len {
            return false;
        }
        // Equal chunks are most often the same chunk: a state kept and found again, or one
        // that a launch changed in a few chunks only (a plan's cache compares the present
        // state with each state it kept). Where both are cut alike, a shared chunk is equal
        // without looking at it.
        let same_cut = self.chunks.len() == other.chunks.len()
            && self.chunks.iter().zip(&other.chunks).all(|(a, b)| a.len() == b.len());
        if same_cut {
            return self.chunks.iter().zip(&other.chunks).all(|(a, b)| Arc::ptr_eq(a, b) || a == b);
        }
        self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl<T: Clone + Eq> Eq for Segments<T> {}

impl<T: Clone> Segments<T> {
    pub fn from_vec(segments: Vec<T>) -> Segments<T> {
        let mut s = Segments { chunks: pieces(segments), ..Segments::default() };
        s.recount();
        s
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether both hold the very same chunks (a clone neither has written since): tests.
    #[cfg(test)]
    pub fn shares(&self, other: &Segments<T>) -> bool {
        self.chunks.len() == other.chunks.len() && self.chunks.iter().zip(&other.chunks).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    #[cfg(test)]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (c, k) = self.locate(i);
        self.chunks[c].get(k)
    }

    /// The first position whose segment fails `pred`, which must hold for a prefix of the
    /// sequence only (as `slice::partition_point`).
    pub fn partition_point(&self, pred: impl Fn(&T) -> bool) -> usize {
        let c = self.chunks.partition_point(|ch| pred(ch.last().expect("chunks are not empty")));
        match self.chunks.get(c) {
            None => self.len,
            Some(ch) => self.starts[c] + ch.partition_point(pred),
        }
    }

    /// The first position at or after `from` whose segment fails `pred`, which must hold for
    /// a prefix of the sequence only, chunk by chunk: a cursor's step to the next row of a
    /// rectangle passes a segment or two, and costs that, not a search.
    pub fn seek(&self, from: Pos, pred: impl Fn(&T) -> bool) -> Pos {
        let (mut c, mut k) = (from.chunk, from.k);
        while let Some(ch) = self.chunks.get(c) {
            if !pred(ch.last().expect("chunks are not empty")) {
                // The last fails `pred`, so the answer is in this chunk.
                return Pos { chunk: c, k: k + gallop(&ch[k..], &pred) };
            }
            c += 1;
            k = 0;
        }
        Pos { chunk: self.chunks.len(), k: 0 }
    }

    /// The position of index `i` (at most `len`: the end).
    pub fn pos(&self, i: usize) -> Pos {
        if i >= self.len {
            return Pos { chunk: self.chunks.len(), k: 0 };
        }
        let (chunk, k) = self.locate(i);
        Pos { chunk, k }
    }

    /// The index of position `p`.
    pub fn index(&self, p: Pos) -> usize {
        self.starts.get(p.chunk).map_or(self.len, |s| s + p.k)
    }

    /// The segments from `from` to `to` (positions, in order), as the slices of the chunks that
    /// hold them: a stretch a change leaves as it was is copied a slice at a time.
    pub fn slices(&self, from: Pos, to: Pos) -> impl Iterator<Item = &[T]> + '_ {
        let last = to.chunk.min(self.chunks.len());
        let first = from.chunk.min(last);
        self.chunks[first..last].iter().enumerate().map(move |(c, ch)| &ch[if c == 0 { from.k } else { 0 }..]).chain(
            self.chunks.get(to.chunk).filter(|_| to.k > 0).map(move |ch| {
                let start = if from.chunk == to.chunk { from.k } else { 0 };
                &ch[start..to.k]
            }),
        )
    }

    /// The position after `p`, which must be inside the sequence.
    pub fn after(&self, p: Pos) -> Pos {
        if p.k + 1 < self.chunks[p.chunk].len() {
            Pos { chunk: p.chunk, k: p.k + 1 }
        } else {
            Pos { chunk: p.chunk + 1, k: 0 }
        }
    }

    /// The segment at `p`, if `p` is inside the sequence.
    pub fn at(&self, p: Pos) -> Option<&T> {
        self.chunks.get(p.chunk).and_then(|ch| ch.get(p.k))
    }

    /// The segments from `p` on.
    pub fn iter_at(&self, p: Pos) -> impl Iterator<Item = &T> + '_ {
        let first = self.chunks.get(p.chunk).map(|ch| &ch[p.k..]).unwrap_or(&[]);
        first.iter().chain(self.chunks.iter().skip(p.chunk + 1).flat_map(|ch| ch.iter()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The segments from position `i` on.
    pub fn iter_from(&self, i: usize) -> impl Iterator<Item = &T> + '_ {
        let (c, k) = if i >= self.len { (self.chunks.len(), 0) } else { self.locate(i) };
        let first = self.chunks.get(c).map(|ch| &ch[k..]).unwrap_or(&[]);
        first.iter().chain(self.chunks.iter().skip(c + 1).flat_map(|ch| ch.iter()))
    }

    /// Replaces the segments at `range` with `with`: only the chunks `range` reaches are
    /// copied (where shared) and rebuilt.
    pub fn splice(&mut self, range: Range<usize>, with: Vec<T>) {
        debug_assert!(range.start <= range.end && range.end <= self.len);
        if self.chunks.is_empty() {
            self.chunks = pieces(with);
            self.recount();
            return;
        }
        // The chunks from the one holding the range's start to the one holding its end (an
        // empty range at the end belongs to the last chunk).
        let (c0, k0) = if range.start >= self.len {
            let last = self.chunks.len() - 1;
            (last, self.chunks[last].len())
        } else {
            self.locate(range.start)
        };
        let (mut c1, k1) = if range.end == range.start {
            (c0, k0)
        } else {
            let (c, k) = self.locate(range.end - 1);
            (c, k + 1)
        };
        let mut total = k0 + with.len() + self.chunks[c1].len() - k1;
        // A small remainder joins its neighbour, so chunks do not dwindle to single segments.
        let mut next: &[T] = &[];
        if total < CHUNK / 4 && c1 + 1 < self.chunks.len() {
            next = &self.chunks[c1 + 1];
            total += next.len();
        }
        // Straight into the new chunks, not through one vector of them all: a change across a
        // tall matrix's rows replaces thousands of segments, and a second copy of them (fresh
        // pages each time) was a third of a Gaussian elimination's copy planning.
        let mut all = self.chunks[c0][..k0].iter().cloned().chain(with).chain(self.chunks[c1][k1..].iter().cloned());
        let mut all = all.by_ref().chain(next.iter().cloned());
        let made = chunked(total, &mut all);
        if !next.is_empty() {
            c1 += 1;
        }
        self.chunks.splice(c0..=c1, made);
        self.recount();
    }

    /// The chunk and the place in it of position `i` (below `len`).
    fn locate(&self, i: usize) -> (usize, usize) {
        let c = self.starts.partition_point(|&s| s <= i) - 1;
        (c, i - self.starts[c])
    }

    fn recount(&mut self) {
        self.starts.clear();
        let mut at = 0;
        for c in &self.chunks {
            self.starts.push(at);
            at += c.len();
        }
        self.len = at;
    }
}

/// The first index of `xs` whose element fails `pred` (which holds for a prefix only), or
/// `xs.len()`: near (a step), or found by galloping (4, 8, 16... ahead) and halving the last
/// gap. A cursor's next answer is most often a few segments on (a row of a matrix may hold
/// several), and halving the whole chunk for each cost more than the steps.
fn gallop<T>(xs: &[T], pred: impl Fn(&T) -> bool) -> usize {
    if let Some(i) = xs.iter().take(4).position(|x| !pred(x)) {
        return i;
    }
    let (mut lo, mut step) = (4, 4);
    while lo + step < xs.len() && pred(&xs[lo + step]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step + 1).min(xs.len());
    lo.min(hi) + xs[lo.min(hi)..hi].partition_point(&pred)
}

/// `segments` in chunks of at most [`CHUNK`], of nearly equal sizes; none for none.
fn pieces<T: Clone>(segments: Vec<T>) -> Vec<Arc<Vec<T>>> {
    if segments.len() <= CHUNK {
        return if segments.is_empty() { Vec::new() } else { vec![Arc::new(segments)] };
    }
    chunked(segments.len(), &mut segments.into_iter())
}

/// The `total` segments of `all` in chunks of at most [`CHUNK`], of nearly equal sizes.
fn chunked<T>(total: usize, all: &mut impl Iterator<Item = T>) -> Vec<Arc<Vec<T>>> {
    if total == 0 {
        return Vec::new();
    }
    let n = total.div_ceil(CHUNK);
    let (size, extra) = (total / n, total % n);
    let made: Vec<Arc<Vec<T>>> =
        (0..n).map(|i| Arc::new(all.by_ref().take(size + usize::from(i < extra)).collect())).collect();
    debug_assert!(all.next().is_none() && made.iter().all(|c| !c.is_empty()));
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment's stand-in: start, end, holders.
    type Seg = (u64, u64, u8);

    fn seg(i: u64) -> Seg {
        (i, i + 1, 1 + (i % 3) as u8)
    }

    /// Splices anywhere, of any length, agree with a plain vector's, and keep the chunks'
    /// invariants.
    #[test]
    fn splices_agree_with_a_vector() {
        let mut model: Vec<Seg> = (0..1000).map(seg).collect();
        let mut s = Segments::from_vec(model.clone());
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1) as u64) as usize
        };
        for round in 0..2000 {
            let a = next(model.len() + 1);
            let b = a + next((model.len() - a).min(300) + 1);
            let with: Vec<Seg> = (0..next(if round % 2 == 0 { 400 } else { 4 })).map(|i| seg(i as u64 + 7)).collect();
            let kept = s.clone();
            let before = model.clone();
            model.splice(a..b, with.clone());
            s.splice(a..b, with);
            assert_eq!(s.len(), model.len());
            assert!(s.iter().eq(model.iter()), "round {round}");
            assert!(kept.iter().eq(before.iter()), "a clone is untouched by the other's splice");
            assert!(s.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
            let i = next(model.len() + 1);
            assert!(s.iter_from(i).eq(model[i..].iter()));
            assert_eq!(s.get(i), model.get(i));
        }
    }

    #[test]
    fn partition_points_agree_with_a_slice() {
        let model: Vec<Seg> = (0..700).map(|i| (2 * i, 2 * i + 2, 1)).collect();
        let s = Segments::from_vec(model.clone());
        for at in 0..1500 {
            assert_eq!(s.partition_point(|x| x.1 <= at), model.partition_point(|x| x.1 <= at));
            assert_eq!(s.partition_point(|x| x.0 < at), model.partition_point(|x| x.0 < at));
        }
    }

    #[test]
    fn seeks_agree_with_a_slice() {
        let model: Vec<Seg> = (0..700).map(|i| (2 * i, 2 * i + 2, 1)).collect();
        let s = Segments::from_vec(model.clone());
        let mut pos = Pos::default();
        for at in (0..1500).step_by(3) {
            pos = s.seek(pos, |x| x.1 <= at);
            let want = model.partition_point(|x| x.1 <= at);
            assert_eq!(s.at(pos), model.get(want), "seek to {at}");
            assert!(s.iter_at(pos).eq(model[want..].iter()));
        }
    }

    #[test]
    fn gallops_agree_with_partition_points() {
        for len in 0..300usize {
            let xs: Vec<usize> = (0..len).collect();
            for cut in 0..=len {
                assert_eq!(gallop(&xs, |&x| x < cut), cut, "len {len}, cut {cut}");
            }
        }
    }

    #[test]
    fn positions_and_slices_agree_with_a_slice() {
        let model: Vec<Seg> = (0..50).map(seg).collect();
        let s = Segments::from_vec(model.clone());
        for i in 0..=model.len() {
            assert_eq!(s.index(s.pos(i)), i);
            if i < model.len() {
                assert_eq!(s.index(s.after(s.pos(i))), i + 1);
            }
            for j in i..=model.len() {
                let got: Vec<Seg> = s.slices(s.pos(i), s.pos(j)).flatten().copied().collect();
                assert_eq!(got, model[i..j], "slices {i}..{j}");
            }
        }
    }

    /// A write copies the chunks it touches; the others stay shared with the clone.
    #[test]
    fn a_splice_copies_only_the_chunks_it_reaches() {
        let mut s = Segments::from_vec((0..10 * CHUNK as u64).map(seg).collect());
        let kept = s.clone();
        assert!(s.shares(&kept));
        s.splice(5..6, vec![seg(5)]);
        let same = s.chunks.iter().zip(&kept.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert!(same >= s.chunks.len() - 2, "{same} of {} chunks shared", s.chunks.len());
        assert_eq!(s, kept, "equal contents compare equal");
    }

    /// Equality looks past shared chunks and into the others, whether both are cut alike or
    /// not: a change anywhere is seen.
    #[test]
    fn equality_sees_a_change_in_any_chunk() {
        let base = Segments::from_vec((0..10 * CHUNK as u64).map(seg).collect());
        for at in [0, CHUNK + 1, 10 * CHUNK - 1] {
            let mut changed = base.clone();
            changed.splice(at..at + 1, vec![(seg(at as u64).0, seg(at as u64).1, 7)]);
            assert_ne!(changed, base, "a change at {at}, cut alike");
            assert_ne!(base, changed);
            // The same contents cut otherwise (a segment taken out and put back elsewhere
            // moves chunk boundaries).
            let recut = Segments::from_vec(changed.iter().copied().collect());
            assert_eq!(recut, changed);
            assert_ne!(recut, base, "a change at {at}, cut otherwise");
        }
    }
}
