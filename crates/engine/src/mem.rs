//! Memory helpers that the protocol (`pml`) and the transports (`btl`) both use: kept
//! below both, so that a transport does not reach up into the protocol for them.

/// Copies `n` bytes from `src` to `dst`: up to 16 bytes inline (two possibly overlapping
/// loads and stores of the widest fitting integer), more through `memcpy`. A window of
/// small messages copies a few bytes per receive, where the call into the C library's
/// `memcpy` (through the PLT) cost more than the copy.
///
/// # Safety
/// `dst` valid for `n` writes and `src` for `n` reads when `n > 0`; no overlap.
#[inline(always)]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n <= 16 {
        // SAFETY: guaranteed by the caller.
        unsafe { copy_small(src, dst, n) };
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

/// Copies `n` bytes from `src` to `dst` as [`copy`] does, but the whole cache lines of
/// `dst` with non-temporal stores (x86-64: `movntdq`, part of the SSE2 baseline), which
/// write each line to memory without first taking it into our cache; the partial lines at
/// either end are copied as usual. Ends with `sfence`, so that the stores are ordered
/// before any later store (a ring's `Release` of the record's frame word): non-temporal
/// stores are not ordered by `Release` alone. Off x86-64, [`copy`].
///
/// For a reader on a far CPU that read the same lines last: a plain store first has to
/// take each line back from that reader's cache, one far round trip after another.
///
/// Not inlined: a call is nothing next to a copy of several KiB, and the plain path's
/// code stays as it was.
///
/// # Safety
/// As for [`copy`].
#[inline(never)]
pub(crate) unsafe fn copy_nt(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        const LINE: usize = 64;
        let start = dst as usize;
        let first = start.next_multiple_of(LINE);
        let end = (start + n) & !(LINE - 1);
        if first >= end {
            // No whole line.
            // SAFETY: forwarded caller guarantee.
            unsafe { copy(src, dst, n) };
            return;
        }
        let head = first - start;
        // SAFETY: `[0, head)`, the lines `[head, end - start)` and `[end - start, n)` lie in
        // both buffers (caller); the streamed stores go to 16-byte aligned addresses (each
        // line's start plus 0, 16, 32, 48); SSE2 is always present on x86-64.
        unsafe {
            copy(src, dst, head);
            let (mut s, mut d) = (src.add(head), dst.add(head));
            while (d as usize) < end {
                let x0 = _mm_loadu_si128(s.cast::<__m128i>());
                let x1 = _mm_loadu_si128(s.add(16).cast::<__m128i>());
                let x2 = _mm_loadu_si128(s.add(32).cast::<__m128i>());
                let x3 = _mm_loadu_si128(s.add(48).cast::<__m128i>());
                _mm_stream_si128(d.cast::<__m128i>(), x0);
                _mm_stream_si128(d.add(16).cast::<__m128i>(), x1);
                _mm_stream_si128(d.add(32).cast::<__m128i>(), x2);
                _mm_stream_si128(d.add(48).cast::<__m128i>(), x3);
                s = s.add(LINE);
                d = d.add(LINE);
            }
            copy(s, d, start + n - end);
            _mm_sfence();
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    // SAFETY: forwarded caller guarantee.
    unsafe {
        copy(src, dst, n)
    };
}

/// [`copy`] of at most 16 bytes: the first and the last `w` bytes (`w` the widest of 8,
/// 4, 2, 1 that fits in `n`), both read before either is written; together they cover
/// the `n` bytes (they overlap when `n < 2w`).
///
/// # Safety
/// As for [`copy`], with `n <= 16`.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!(n <= 16);
    // SAFETY: every access lies in `[0, n)` of its buffer (caller); unaligned accesses.
    unsafe {
        if n >= 8 {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else if n >= 2 {
            let a = src.cast::<u16>().read_unaligned();
            let b = src.add(n - 2).cast::<u16>().read_unaligned();
            dst.cast::<u16>().write_unaligned(a);
            dst.add(n - 2).cast::<u16>().write_unaligned(b);
        } else if n == 1 {
            dst.write(src.read());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{copy, copy_nt};

    /// `copy_nt` at lengths around whole lines (none, one, several, with partial lines at
    /// either end) and at every 8-byte offset of a line for the destination and odd ones for
    /// the source: exactly the `n` bytes arrive, nothing around them is touched.
    #[test]
    fn copy_nt_moves_exactly_n_bytes_at_any_alignment() {
        #[repr(C, align(64))]
        struct Buf([u8; 8192]);
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut dst = Box::new(Buf([0; 8192]));
        for n in [
            0, 1, 17, 63, 64, 65, 127, 128, 129, 200, 1000, 2048, 4096, 4100,
        ] {
            for d_off in (0..72).step_by(8).chain([3, 61]) {
                for so in [0, 1, 13] {
                    dst.0.fill(0xaa);
                    // SAFETY: d_off + n and so + n stay below 8192; distinct buffers.
                    unsafe { copy_nt(src.as_ptr().add(so), dst.0.as_mut_ptr().add(d_off), n) };
                    assert_eq!(
                        &dst.0[d_off..d_off + n],
                        &src[so..so + n],
                        "n={n} so={so} do={d_off}"
                    );
                    assert!(dst.0[..d_off].iter().all(|&b| b == 0xaa), "before: n={n}");
                    assert!(
                        dst.0[d_off + n..].iter().all(|&b| b == 0xaa),
                        "after: n={n}"
                    );
                }
            }
        }
    }

    /// `copy` at every length up to 40 bytes (the inline small copy and `memcpy` on both
    /// sides of 16) and every alignment of source and destination: exactly the `n` bytes
    /// arrive, nothing before or after the destination range is touched.
    #[test]
    fn copy_moves_exactly_n_bytes_at_any_alignment() {
        let src: Vec<u8> = (1..=64u8).collect();
        for n in 0..=40usize {
            for so in 0..8 {
                for d_off in 0..8 {
                    let mut dst = [0xaau8; 64];
                    // SAFETY: so + n <= 48 < 64 and d_off + n <= 48 < 64; distinct buffers.
                    unsafe { copy(src.as_ptr().add(so), dst.as_mut_ptr().add(d_off), n) };
                    assert_eq!(
                        &dst[d_off..d_off + n],
                        &src[so..so + n],
                        "n={n} so={so} do={d_off}"
                    );
                    assert!(dst[..d_off].iter().all(|&b| b == 0xaa), "before: n={n}");
                    assert!(dst[d_off + n..].iter().all(|&b| b == 0xaa), "after: n={n}");
                }
            }
        }
    }
}
