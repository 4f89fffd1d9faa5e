//! One stable sort for every list the device orders, and maps and sets
//! built by insertion. The standard library's stable sort is generic: each
//! element type and comparator it runs on is a copy of the whole algorithm
//! (some 2.5 KB of aarch64 code), and `BTreeMap`/`BTreeSet`'s `collect`
//! sorts its input with it. Here one non-generic sort orders positions
//! (`usize`) through the caller's comparator, and each element type adds
//! only the few instructions that apply the order. The result is the
//! standard library's: stable (equal elements keep their order), so
//! [`sort_by`] may replace `slice::sort_by` anywhere. Speed is not what
//! matters here: the lists are a node's modules, ports, volumes, tags.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Sorts `v` stably by `cmp`, as `v.sort_by(cmp)` does.
pub fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut order = order(v.len(), &mut |a, b| cmp(&v[a], &v[b]));
    permute(v, &mut order);
}

/// Sorts `v` stably by its elements' order, as `v.sort()` does.
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp)
}

/// The positions `0..n` in the order `cmp` puts them, equal ones in their
/// own order: the one instantiation of the standard library's sort.
#[inline(never)]
fn order(n: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Moves `v`'s elements so that position `k` holds the element that was
/// at `order[k]`, one cycle of the permutation at a time (`order` is left
/// as the identity).
fn permute<T>(v: &mut [T], order: &mut [usize]) {
    for start in 0..order.len() {
        let mut at = start;
        loop {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

/// A map of `pairs`, as `pairs.collect::<BTreeMap<_, _>>()` makes it: of
/// equal keys the last pair's value is kept.
pub fn map<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut m = BTreeMap::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    m
}

/// A map of `pairs` or the first error among them, as
/// `pairs.collect::<Result<BTreeMap<_, _>, _>>()` makes it.
pub fn try_map<K: Ord, V, E>(
    pairs: impl IntoIterator<Item = Result<(K, V), E>>,
) -> Result<BTreeMap<K, V>, E> {
    let mut m = BTreeMap::new();
    for pair in pairs {
        let (k, v) = pair?;
        m.insert(k, v);
    }
    Ok(m)
}

/// A JSON object of `pairs`, as `pairs.collect::<serde_json::Map<_, _>>()`
/// makes it.
pub fn object(
    pairs: impl IntoIterator<Item = (String, serde_json::Value)>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    m
}

/// A set of `items`, as `items.collect::<BTreeSet<_>>()` makes it.
pub fn set<T: Ord>(items: impl IntoIterator<Item = T>) -> BTreeSet<T> {
    let mut s = BTreeSet::new();
    for t in items {
        s.insert(t);
    }
    s
}

/// [`map`], [`try_map`], [`object`] and [`set`] as an iterator's
/// methods, to stand where `collect` stood.
pub trait Insert: Iterator + Sized {
    /// [`map`] of this iterator's pairs.
    fn into_map<K: Ord, V>(self) -> BTreeMap<K, V>
    where
        Self: Iterator<Item = (K, V)>,
    {
        map(self)
    }
    /// [`try_map`] of this iterator's results.
    fn try_into_map<K: Ord, V, E>(self) -> Result<BTreeMap<K, V>, E>
    where
        Self: Iterator<Item = Result<(K, V), E>>,
    {
        try_map(self)
    }
    /// [`object`] of this iterator's pairs.
    fn into_object(self) -> serde_json::Map<String, serde_json::Value>
    where
        Self: Iterator<Item = (String, serde_json::Value)>,
    {
        object(self)
    }
    /// [`set`] of this iterator's items.
    fn into_set<T: Ord>(self) -> BTreeSet<T>
    where
        Self: Iterator<Item = T>,
    {
        set(self)
    }
    /// The set of this iterator's items or the first error among them, as
    /// `collect::<Result<BTreeSet<_>, _>>()` makes it.
    fn try_into_set<T: Ord, E>(self) -> Result<BTreeSet<T>, E>
    where
        Self: Iterator<Item = Result<T, E>>,
    {
        let mut s = BTreeSet::new();
        for t in self {
            s.insert(t?);
        }
        Ok(s)
    }
}

impl<I: Iterator> Insert for I {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_the_standard_library_does_equal_elements_kept_in_order() {
        // (input, key of each element): the element's second half tells
        // equal keys apart, so a sort that is not stable fails.
        let cases: &[&[(u8, u8)]] = &[
            &[],
            &[(1, 0)],
            &[(2, 0), (1, 0)],
            &[(1, 0), (1, 1), (1, 2)],
            &[(3, 0), (1, 1), (2, 2), (1, 3), (3, 4), (0, 5)],
            &[(5, 0), (4, 1), (3, 2), (2, 3), (1, 4), (0, 5)],
            &[(0, 0), (1, 1), (2, 2), (0, 3), (1, 4), (2, 5), (0, 6)],
            &[
                (2, 0),
                (0, 1),
                (1, 2),
                (0, 3),
                (2, 4),
                (1, 5),
                (2, 6),
                (0, 7),
                (1, 8),
            ],
        ];
        for case in cases {
            let mut ours = case.to_vec();
            sort_by(&mut ours, |a, b| a.0.cmp(&b.0));
            let mut std = case.to_vec();
            std.sort_by_key(|a| a.0);
            assert_eq!(ours, std, "{case:?}");
        }
        // Every permutation of 6 distinct elements, and `sort`.
        let mut p: Vec<u32> = (0..6).collect();
        let mut seen = 0;
        loop {
            let mut ours = p.clone();
            sort(&mut ours);
            assert_eq!(ours, (0..6).collect::<Vec<_>>(), "{p:?}");
            seen += 1;
            // The next permutation in lexicographic order.
            let Some(i) = (1..p.len()).rev().find(|&i| p[i - 1] < p[i]) else {
                break;
            };
            let j = (i..p.len()).rev().find(|&j| p[j] > p[i - 1]).unwrap_or(i);
            p.swap(i - 1, j);
            p[i..].reverse();
        }
        assert_eq!(seen, 720);
    }

    #[test]
    fn maps_and_sets_are_what_collect_makes() {
        let pairs = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)];
        assert_eq!(map(pairs), pairs.into_iter().collect::<BTreeMap<_, _>>());
        assert_eq!(map(Vec::<(u8, u8)>::new()), BTreeMap::new());
        let tried = [Ok(("b", 1)), Ok(("a", 2)), Ok(("b", 3))];
        assert_eq!(try_map::<_, _, u8>(tried), tried.into_iter().collect());
        let failed = [Ok(("b", 1)), Err(7), Ok(("a", 2)), Err(8)];
        assert_eq!(try_map(failed), Err(7));
        let json = [
            ("b".to_string(), 1.into()),
            ("a".into(), 2.into()),
            ("b".into(), 3.into()),
        ];
        assert_eq!(
            object(json.clone()),
            json.into_iter().collect::<serde_json::Map<_, _>>()
        );
        let items = ["x", "a", "x", "m"];
        assert_eq!(set(items), items.into_iter().collect::<BTreeSet<_>>());
        let tried = [Ok("x"), Ok("a"), Ok("x")];
        let collected: Result<BTreeSet<_>, u8> = tried.into_iter().collect();
        assert_eq!(tried.into_iter().try_into_set(), collected);
        assert_eq!([Ok("x"), Err(1), Err(2)].into_iter().try_into_set(), Err(1));
    }
}
