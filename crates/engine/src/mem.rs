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
    use super::copy;

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
