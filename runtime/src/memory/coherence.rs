//! The coherence map of one virtual buffer: for every byte interval, the set of holders (the
//! host, device 0..n-1) whose copy of it is current.
//!
//! Invariants:
//! - the segments are sorted, disjoint, cover `0..size` exactly, and no two neighbours have
//!   the same holders (so equal states compare equal, which the copy-plan cache relies on);
//! - every byte has at least one holder: a write makes the writer the only holder, a read adds
//!   the reader, nothing removes the last holder.
//!
//! Byte intervals, not elements: nodes may view one buffer with different element types.
//!
//! A map shares its segments (copy on write, by chunks: [`Segments`]), so the copy-plan cache
//! can keep the states before and after a launch and put one back at the cost of a few
//! pointers: in a loop's steady state a launch finds its buffers in the very state it
//! recorded, and compares pointers, not the thousands of segments a scatter leaves (Parboil
//! spmv). A change copies only the chunks it reaches.

use super::segments::{Pos, Segments};
use crate::devices::{Place, MAX_DEVICES};

/// A set of holders: bit 0 is the host, bit `1 + k` device `k` (128 bits: the host and up to
/// [`MAX_DEVICES`] devices, which runs over many ranks need).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Holders(pub u128);

impl Holders {
    pub const HOST: Holders = Holders(1);

    /// The set holding only `p`.
    pub fn of(p: Place) -> Holders {
        match p {
            Place::Host => Holders::HOST,
            Place::Device(k) => Holders::device(k),
        }
    }

    pub fn device(k: usize) -> Holders {
        debug_assert!(k < MAX_DEVICES);
        Holders(1 << (1 + k))
    }

    pub fn contains(self, other: Holders) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn has(self, p: Place) -> bool {
        self.contains(Holders::of(p))
    }

    pub fn with(self, other: Holders) -> Holders {
        Holders(self.0 | other.0)
    }

    /// The holder to copy from: a device when one holds the data (peer copies are the fast
    /// path on GPUs), the lowest-numbered; else the host.
    pub fn source(self) -> Option<Place> {
        let devices = self.0 >> 1;
        if devices != 0 {
            Some(Place::Device(devices.trailing_zeros() as usize))
        } else if self.has(Place::Host) {
            Some(Place::Host)
        } else {
            None
        }
    }
}

/// `start..end` (bytes, half open) held by `holders`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    pub holders: Holders,
}

#[derive(Clone, Debug, Eq)]
pub struct Coherence {
    size: u64,
    segments: Segments<Segment>,
}

impl PartialEq for Coherence {
    fn eq(&self, other: &Coherence) -> bool {
        self.size == other.size && self.segments == other.segments
    }
}

impl Coherence {
    /// A buffer of `size` bytes current at `holders` only.
    pub fn new(size: u64, holders: Holders) -> Coherence {
        let segments = if size == 0 { Vec::new() } else { vec![Segment { start: 0, end: size, holders }] };
        Coherence { size, segments: Segments::from_vec(segments) }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn segments(&self) -> impl Iterator<Item = &Segment> + '_ {
        self.segments.iter()
    }

    /// The pieces of `start..end` (clipped to the buffer) with their holders, in order.
    pub fn query(&self, start: u64, end: u64) -> impl Iterator<Item = Segment> + '_ {
        let (start, end) = (start.min(self.size), end.min(self.size));
        let first = self.segments.partition_point(|s| s.end <= start);
        self.segments.iter_from(first).take_while(move |s| s.start < end).map(move |s| Segment {
            start: s.start.max(start),
            end: s.end.min(end),
            holders: s.holders,
        })
    }

    /// A reader of the map for queries in increasing order of their starts: each costs the
    /// segments it passes, not a search over the whole map.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { map: self, at: Pos::default() }
    }

    /// The pieces of `start..end` that `place` does not hold, with their holders.
    pub fn missing(&self, start: u64, end: u64, place: Place) -> Vec<Segment> {
        self.query(start, end).filter(|s| !s.holders.has(place)).collect()
    }

    /// `place` now holds `start..end` too (it received a copy).
    pub fn add(&mut self, start: u64, end: u64, place: Place) {
        let h = Holders::of(place);
        self.update(start, end, |old| old.with(h));
    }

    /// `place` is now the only holder of `start..end` (it wrote it).
    pub fn set_only(&mut self, start: u64, end: u64, place: Place) {
        let h = Holders::of(place);
        self.update(start, end, |_| h);
    }

    /// `place` no longer holds `start..end` (its copy is gone); every byte there must have
    /// another holder.
    pub fn drop_holder(&mut self, start: u64, end: u64, place: Place) {
        let h = Holders::of(place);
        self.update(start, end, |old| {
            let left = Holders(old.0 & !h.0);
            debug_assert!(left.0 != 0, "dropping the last holder");
            if left.0 == 0 {
                old
            } else {
                left
            }
        });
    }

    /// `place` now holds every run of `runs` too: sorted, disjoint byte runs (the rows of a
    /// rectangle). One pass over the map, however many runs: row by row, each update would
    /// move the segments after it (quadratic in the rows of a tall rectangle).
    pub fn add_runs(&mut self, runs: impl IntoIterator<Item = (u64, u64)>, place: Place) {
        let h = Holders::of(place);
        self.update_runs(runs, |old| old.with(h));
    }

    /// `place` is now the only holder of every run of `runs` (sorted, disjoint).
    pub fn set_only_runs(&mut self, runs: impl IntoIterator<Item = (u64, u64)>, place: Place) {
        let h = Holders::of(place);
        self.update_runs(runs, |_| h);
    }

    /// The host is now the only holder of everything it holds: its copy may have been written
    /// since the devices received theirs (HPVM's rule: the host's copy of what it holds is the
    /// one that counts, so a launch copies it again).
    pub fn host_wins(&mut self) {
        if !self.holders_beside_host() {
            return;
        }
        let mut out: Vec<Segment> = Vec::with_capacity(self.segments.len());
        for s in self.segments.iter() {
            let holders = if s.holders.has(Place::Host) { Holders::HOST } else { s.holders };
            match out.last_mut() {
                Some(l) if l.holders == holders => l.end = s.end,
                _ => out.push(Segment { holders, ..*s }),
            }
        }
        self.segments = Segments::from_vec(out);
    }

    /// [`Coherence::host_wins`] within `runs` (sorted, disjoint byte runs): where the host
    /// wrote.
    pub fn host_wins_in(&mut self, runs: Vec<(u64, u64)>) {
        if runs.is_empty() || !self.holders_beside_host() {
            return;
        }
        self.update_runs(runs, |h| if h.has(Place::Host) { Holders::HOST } else { h });
    }

    /// The pieces of `runs` (sorted, disjoint byte runs) that the host does not hold: where
    /// a device's copy is newer than the host's. A host write there raced with the kernel
    /// that made it newer (the host wrote without waiting for it), and one of the two writes
    /// would be lost.
    pub fn stale_for_host(&self, runs: &[(u64, u64)]) -> Vec<Segment> {
        let mut cursor = self.cursor();
        let mut stale = Vec::new();
        for &(a, b) in runs {
            stale.extend(cursor.query(a, b).filter(|s| !s.holders.has(Place::Host)));
        }
        stale
    }

    /// Whether some byte the host holds is held by a device too (else host writes change
    /// nothing the runtime must know).
    pub fn holders_beside_host(&self) -> bool {
        self.segments.iter().any(|s| s.holders.has(Place::Host) && s.holders != Holders::HOST)
    }

    fn update_runs(&mut self, runs: impl IntoIterator<Item = (u64, u64)>, f: impl Fn(Holders) -> Holders) {
        let size = self.size;
        let mut runs = runs.into_iter().map(|(a, b)| (a.min(size), b.min(size))).filter(|(a, b)| a < b).peekable();
        let Some(&(first, _)) = runs.peek() else { return };
        // Only the segments from the first run on change (and the one before, which may merge
        // with them): a buffer's map may hold many segments that one rectangle never reaches.
        let from = self.segments.partition_point(|s| s.end <= first).saturating_sub(1);
        let segs = &self.segments;
        // Every segment from the first run's on is copied at most once, and each run adds at
        // most two: sized once, not grown (and copied) step by step.
        let mut out: Vec<Segment> = Vec::with_capacity(self.segments.len() - from + 2 * runs.size_hint().0 + 2);
        let push = |out: &mut Vec<Segment>, start: u64, end: u64, holders: Holders| match out.last_mut() {
            Some(l) if l.holders == holders && l.end == start => l.end = end,
            _ => out.push(Segment { start, end, holders }),
        };
        // `next`: the position of the first segment not yet taken; `at`: how far into the one
        // before it (`cur`) the output has come.
        let mut next = segs.pos(from);
        let mut cur: Option<Segment> = None;
        let mut at = 0;
        let mut last_end = 0;
        for (lo, hi) in runs {
            debug_assert!(lo >= last_end, "runs must be sorted and disjoint");
            last_end = hi;
            let mut lo = lo;
            while lo < hi {
                // The rest of the segment in hand, where the run starts past it.
                if let Some(c) = cur.filter(|c| c.end <= lo) {
                    push(&mut out, at, c.end, c.holders);
                    cur = None;
                }
                if cur.is_none() {
                    // The segments the run starts past are copied as they are, a slice at a
                    // time (a matrix's column reaches one segment of the several in each row).
                    let reach = segs.seek(next, |s| s.end <= lo);
                    let mut slices = segs.slices(next, reach);
                    if let Some((head, tail)) = slices.next().and_then(|s| s.split_first()) {
                        // Only the first may merge with what was written before it: neighbours
                        // in the map differ already.
                        push(&mut out, head.start, head.end, head.holders);
                        out.extend_from_slice(tail);
                        for s in slices {
                            out.extend_from_slice(s);
                        }
                    }
                    let Some(&c) = segs.at(reach) else { break };
                    next = segs.after(reach);
                    cur = Some(c);
                    at = c.start;
                }
                let c = cur.expect("a segment in hand");
                if lo > at {
                    push(&mut out, at, lo, c.holders);
                }
                let end = hi.min(c.end);
                push(&mut out, lo.max(at), end, f(c.holders));
                at = end;
                lo = end;
                if at == c.end {
                    cur = None;
                }
            }
        }
        if let Some(c) = cur {
            push(&mut out, at, c.end, c.holders);
        }
        // The next untouched segment may merge with the last one written.
        let mut to = segs.index(next);
        if let Some(&n) = segs.at(next) {
            push(&mut out, n.start, n.end, n.holders);
            to += 1;
        }
        self.segments.splice(from..to, out);
    }

    fn update(&mut self, start: u64, end: u64, f: impl Fn(Holders) -> Holders) {
        let (start, end) = (start.min(self.size), end.min(self.size));
        if start >= end {
            return;
        }
        let i = self.segments.partition_point(|s| s.end <= start);
        let j = self.segments.partition_point(|s| s.start < end);
        let mut mid = Vec::with_capacity(j - i + 2);
        for s in self.segments.iter_from(i).take(j - i) {
            if s.start < start {
                mid.push(Segment { start: s.start, end: start, holders: s.holders });
            }
            mid.push(Segment { start: s.start.max(start), end: s.end.min(end), holders: f(s.holders) });
            if s.end > end {
                mid.push(Segment { start: end, end: s.end, holders: s.holders });
            }
        }
        // Merge with the untouched neighbours too, so equal states stay equal.
        let lo = i.saturating_sub(1);
        let hi = (j + 1).min(self.segments.len());
        let mut merged: Vec<Segment> = Vec::with_capacity(mid.len() + 2);
        let before = self.segments.iter_from(lo).take(i - lo).copied();
        let after = self.segments.iter_from(j).take(hi - j).copied();
        for s in before.chain(mid).chain(after) {
            match merged.last_mut() {
                Some(l) if l.holders == s.holders && l.end == s.start => l.end = s.end,
                _ => merged.push(s),
            }
        }
        self.segments.splice(lo..hi, merged);
    }
}

/// See [`Coherence::cursor`].
pub struct Cursor<'a> {
    map: &'a Coherence,
    at: Pos,
}

impl Cursor<'_> {
    /// As [`Coherence::query`]; `start` must not be below the previous query's.
    pub fn query(&mut self, start: u64, end: u64) -> impl Iterator<Item = Segment> + '_ {
        let segs = &self.map.segments;
        let (start, end) = (start.min(self.map.size), end.min(self.map.size));
        // On from where the last query was.
        self.at = segs.seek(self.at, |s| s.end <= start);
        segs.iter_at(self.at).take_while(move |s| s.start < end).map(move |s| Segment {
            start: s.start.max(start),
            end: s.end.min(end),
            holders: s.holders,
        })
    }

    /// The whole segment holding byte `pos`, which must be inside the map and not below the
    /// previous query's start.
    pub fn segment_at(&mut self, pos: u64) -> Segment {
        debug_assert!(pos < self.map.size);
        let segs = &self.map.segments;
        self.at = segs.seek(self.at, |s| s.end <= pos);
        *segs.at(self.at).expect("a byte inside the map has a segment")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One holder set per byte: the obvious model the map must agree with.
    fn model_check(c: &Coherence, model: &[Holders]) {
        let mut at = 0;
        let segments: Vec<Segment> = c.segments().copied().collect();
        for (k, s) in segments.iter().enumerate() {
            assert_eq!(s.start, at, "gap or overlap at {at}: {segments:?}");
            assert!(s.end > s.start);
            assert!(s.holders.0 != 0, "a segment without holders");
            if k > 0 {
                assert_ne!(segments[k - 1].holders, s.holders, "unmerged neighbours");
            }
            for b in s.start..s.end {
                assert_eq!(model[b as usize], s.holders, "byte {b}");
            }
            at = s.end;
        }
        assert_eq!(at, c.size());
    }

    #[test]
    fn agrees_with_a_per_byte_model() {
        let mut seed = 1u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for size in [1u64, 7, 64, 300] {
            let mut c = Coherence::new(size, Holders::HOST);
            let mut model = vec![Holders::HOST; size as usize];
            for _ in 0..400 {
                let a = next(size + 2);
                let b = next(size + 2);
                let (lo, hi) = (a.min(b), a.max(b));
                let place = if next(4) == 0 { Place::Host } else { Place::Device(next(5) as usize) };
                let missing = c.missing(lo, hi, place);
                for s in &missing {
                    for byte in s.start..s.end {
                        assert!(!model[byte as usize].has(place));
                    }
                }
                let lacking = (lo.min(size)..hi.min(size)).filter(|&x| !model[x as usize].has(place)).count() as u64;
                assert_eq!(missing.iter().map(|s| s.end - s.start).sum::<u64>(), lacking);
                if next(4) == 0 {
                    // Rows of a rectangle, as one batch.
                    let (rows, pitch, width) = (1 + next(6), 1 + next(20), 1 + next(10));
                    let width = width.min(pitch);
                    let runs: Vec<(u64, u64)> = (0..rows).map(|r| (lo + r * pitch, lo + r * pitch + width)).collect();
                    let only = next(2) == 0;
                    if only {
                        c.set_only_runs(runs.iter().copied(), place);
                    } else {
                        c.add_runs(runs.iter().copied(), place);
                    }
                    for &(a, b) in &runs {
                        for x in a.min(size)..b.min(size) {
                            model[x as usize] =
                                if only { Holders::of(place) } else { model[x as usize].with(Holders::of(place)) };
                        }
                    }
                } else if next(2) == 0 {
                    c.add(lo, hi, place);
                    for x in lo.min(size)..hi.min(size) {
                        model[x as usize] = model[x as usize].with(Holders::of(place));
                    }
                } else {
                    c.set_only(lo, hi, place);
                    for x in lo.min(size)..hi.min(size) {
                        model[x as usize] = Holders::of(place);
                    }
                }
                model_check(&c, &model);
                // A cursor answers increasing queries as `query` does.
                let mut starts: Vec<u64> = (0..4).map(|_| next(size + 2)).collect();
                starts.sort_unstable();
                let mut cursor = c.cursor();
                for s in starts {
                    let e = s + next(size + 2 - s.min(size));
                    let got: Vec<Segment> = cursor.query(s, e).collect();
                    assert_eq!(got, c.query(s, e).collect::<Vec<_>>(), "query {s}..{e}");
                }
            }
        }
    }

    #[test]
    fn host_wins_what_it_holds() {
        let d0 = Holders::device(0);
        let d1 = Holders::device(1);
        let mut c = Coherence::new(100, Holders::HOST);
        c.add(0, 40, Place::Device(0));
        c.set_only(40, 60, Place::Device(1));
        c.add(60, 80, Place::Device(1));
        let mut model = vec![Holders::HOST; 100];
        model[..40].fill(Holders::HOST.with(d0));
        model[40..60].fill(d1);
        model[60..80].fill(Holders::HOST.with(d1));
        model_check(&c, &model);
        c.host_wins();
        for (i, m) in model.iter_mut().enumerate() {
            if m.has(Place::Host) {
                *m = Holders::HOST;
            }
            assert_eq!(*m, if (40..60).contains(&i) { d1 } else { Holders::HOST });
        }
        model_check(&c, &model);
        assert_eq!(c.segments().count(), 3, "neighbours merged: {:?}", c.segments);
    }

    #[test]
    fn host_writes_where_a_device_is_newer_are_found() {
        let mut c = Coherence::new(100, Holders::HOST);
        c.add(0, 30, Place::Device(0));
        c.set_only(50, 60, Place::Device(1));
        // Writes where the host holds the bytes (alone or with a device) race with nothing.
        assert_eq!(c.stale_for_host(&[(0, 10), (20, 50), (60, 100)]), []);
        assert_eq!(c.stale_for_host(&[]), []);
        // The pieces the host does not hold, clipped to the runs that reach them.
        let d1 = Holders::device(1);
        let stale = c.stale_for_host(&[(10, 20), (45, 55), (58, 70)]);
        assert_eq!(stale, [Segment { start: 50, end: 55, holders: d1 }, Segment { start: 58, end: 60, holders: d1 }]);
    }

    #[test]
    fn equal_states_compare_equal() {
        let mut a = Coherence::new(100, Holders::HOST);
        a.set_only(0, 50, Place::Device(0));
        a.set_only(50, 100, Place::Device(1));
        a.add(40, 60, Place::Device(0));
        a.add(40, 50, Place::Device(1));
        let mut b = Coherence::new(100, Holders::HOST);
        b.set_only(0, 100, Place::Device(1));
        b.set_only(0, 40, Place::Device(0));
        b.add(40, 60, Place::Device(0));
        assert_eq!(a, b);
    }

    #[test]
    fn clones_share_until_one_is_written() {
        let mut a = Coherence::new(100, Holders::HOST);
        a.set_only(0, 50, Place::Device(0));
        let mut b = a.clone();
        assert!(a.segments.shares(&b.segments));
        b.set_only(50, 100, Place::Device(1));
        assert_ne!(a, b);
        assert_eq!(a.segments().count(), 2, "the original is untouched: {:?}", a.segments);
        // Equal maps that share nothing still compare equal.
        b.set_only(50, 100, Place::Host);
        assert!(!a.segments.shares(&b.segments));
        assert_eq!(a, b);
    }

    #[test]
    fn sources_prefer_devices() {
        assert_eq!(Holders::HOST.with(Holders::device(3)).source(), Some(Place::Device(3)));
        assert_eq!(Holders::HOST.source(), Some(Place::Host));
        assert_eq!(Holders(0).source(), None);
    }
}
