//! [`SmallWords`]: one word per rank (a v-collective's byte counts or displacements) kept
//! inline for small communicators.

use std::ops::{Deref, DerefMut};

/// Ranks whose words a [`SmallWords`] keeps inline.
const INLINE: usize = 4;

/// One word per rank (byte counts or displacements of a v-collective's blocks), inline up
/// to [`SmallWords::INLINE`] ranks, on the heap past that: a nonblocking alltoallv's four
/// arrays ([`super::SmKind::Alltoallv`]) then cost a small communicator no allocation (np=2,
/// 4 B: four `Vec`s a call, about 560 of its 3400 instructions in allocating and freeing).
#[derive(Clone)]
pub struct SmallWords(Words);

#[derive(Clone)]
enum Words {
    /// The first `len` words of the array.
    Inline(u8, [usize; INLINE]),
    Heap(Vec<usize>),
}

impl SmallWords {
    /// Ranks whose words are kept inline.
    pub const INLINE: usize = INLINE;

    /// No words (inline).
    #[inline]
    pub const fn new() -> SmallWords {
        SmallWords(Words::Inline(0, [0; INLINE]))
    }

    /// `n` zero words.
    #[inline]
    pub fn zeros(n: usize) -> SmallWords {
        if n <= INLINE {
            SmallWords(Words::Inline(n as u8, [0; INLINE]))
        } else {
            SmallWords(Words::Heap(vec![0; n]))
        }
    }

    /// Append `w` (moving the words to the heap once they pass [`SmallWords::INLINE`]).
    #[inline]
    pub fn push(&mut self, w: usize) {
        match &mut self.0 {
            Words::Inline(n, a) if usize::from(*n) < INLINE => {
                a[usize::from(*n)] = w;
                *n += 1;
            }
            Words::Inline(_, a) => {
                let mut v = Vec::with_capacity(2 * INLINE);
                v.extend_from_slice(a);
                v.push(w);
                self.0 = Words::Heap(v);
            }
            Words::Heap(v) => v.push(w),
        }
    }

    /// The words as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[usize] {
        self
    }
}

impl Default for SmallWords {
    fn default() -> SmallWords {
        SmallWords::new()
    }
}

impl Deref for SmallWords {
    type Target = [usize];
    #[inline]
    fn deref(&self) -> &[usize] {
        match &self.0 {
            Words::Inline(n, a) => &a[..usize::from(*n)],
            Words::Heap(v) => v,
        }
    }
}

impl DerefMut for SmallWords {
    #[inline]
    fn deref_mut(&mut self) -> &mut [usize] {
        match &mut self.0 {
            Words::Inline(n, a) => &mut a[..usize::from(*n)],
            Words::Heap(v) => v,
        }
    }
}

impl From<Vec<usize>> for SmallWords {
    /// The words of `v`, copied inline (and `v` freed) when they fit.
    fn from(v: Vec<usize>) -> SmallWords {
        if v.len() <= INLINE {
            v.into_iter().collect()
        } else {
            SmallWords(Words::Heap(v))
        }
    }
}

impl From<&[usize]> for SmallWords {
    fn from(s: &[usize]) -> SmallWords {
        s.iter().copied().collect()
    }
}

impl FromIterator<usize> for SmallWords {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> SmallWords {
        let mut w = SmallWords::new();
        for x in it {
            w.push(x);
        }
        w
    }
}

impl std::fmt::Debug for SmallWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for SmallWords {
    fn eq(&self, o: &SmallWords) -> bool {
        **self == **o
    }
}

impl Eq for SmallWords {}

#[cfg(test)]
mod tests {
    use super::SmallWords;

    #[test]
    fn words_stay_inline_up_to_the_bound_and_move_to_the_heap_past_it() {
        let mut w = SmallWords::new();
        for i in 0..SmallWords::INLINE {
            w.push(10 * i);
            assert!(matches!(w.0, super::Words::Inline(..)), "{i} words inline");
        }
        w.push(7);
        assert!(matches!(w.0, super::Words::Heap(_)));
        let want: Vec<usize> = (0..SmallWords::INLINE).map(|i| 10 * i).chain([7]).collect();
        assert_eq!(&*w, &want[..]);
        w[1] = 3;
        assert_eq!(w[1], 3);
    }

    #[test]
    fn conversions_keep_the_words_and_compare_by_content() {
        let small = SmallWords::from(vec![4, 5]);
        assert!(matches!(small.0, super::Words::Inline(2, _)));
        assert_eq!(&*small, &[4, 5]);
        let big = SmallWords::from(vec![1; SmallWords::INLINE + 1]);
        assert!(matches!(big.0, super::Words::Heap(_)));
        assert_eq!(big.len(), SmallWords::INLINE + 1);
        // Equal words compare equal whatever their storage.
        let heap = SmallWords(super::Words::Heap(vec![4, 5]));
        assert_eq!(small, heap);
        assert_ne!(small, SmallWords::from(&[4, 6][..]));
        assert_eq!(SmallWords::zeros(3).as_slice(), &[0, 0, 0]);
        assert_eq!(SmallWords::zeros(9).as_slice(), &[0; 9]);
        assert_eq!(format!("{small:?}"), "[4, 5]");
    }
}
