//! Copies into the large region that bypass the writer's caches (non-temporal stores).
//!
//! A writer of the large region rewrites, at every collective, the same slot lines its
//! readers read at the last one: a plain copy must first take each line away from the
//! reader's cache (a read for ownership per 64 bytes, answered by the other core). On
//! 2 vCPUs of a KVM guest whose host places them on different core complexes ("far": a
//! cache-line round trip of ~500 ns instead of ~100), measured with one writer and one
//! reader per vCPU (the reader folds the slot into a private vector after each copy):
//! 1 MiB copied in 415-480 µs plainly against 39-41 µs streaming (the fold 46-48 µs
//! against 47-50), 64 KiB 30 µs against 3.1, 8 KiB 2.8 µs against 0.9; near, 1 MiB
//! 74-75 µs against 38 (the fold 27-29 µs against 47). Non-temporal stores write whole
//! lines to memory without fetching them, and leave no copy in the writer's cache that
//! the reader's loads would have to fetch from there. But near, the reader's fold then
//! reads memory instead of the shared cache: 4 ranks on 2 vCPUs, reduce 1 MiB, 257 µs
//! streaming against 130 plainly in one near launch (223-243 against 803-938 far). So
//! every copy from [`STREAM_MIN`] bytes is timed, and streams only while plain copies are
//! measured [`FAR_RATIO`] times slower than streaming ones ([`streams`]).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(target_arch = "x86_64")]
use std::time::Instant;

/// Smallest copy that may stream: below it always a plain copy.
pub(super) const STREAM_MIN: usize = 32 * 1024;

/// A copy streams while the last plain copy of its size class cost more than this many
/// times the last streaming one, per byte. Measured per byte, plain against streaming
/// (the writer's side): near 0.9 times at 8 KiB, 1.6 at 16 KiB, 2.0 at 1 MiB (where the
/// reader's fold from memory then costs more than the plain copy saves: the plain copy is
/// the faster whole); far 3.1-3.4 at 8 KiB, 4.6-5 at 16 KiB, 7-8 at 32 KiB, 10 at 64 KiB,
/// 10-12 at 1 MiB.
const FAR_RATIO: u64 = 4;

/// Every this many copies of a size class, one goes the other way than the estimates say,
/// to follow a change of placement (it flips between launches, sometimes within one).
const EXPLORE: u32 = 32;

/// Size classes of copies from [`STREAM_MIN`] bytes: powers of two, the last one open.
const CLASSES: usize = 9;

/// Last measured cost of a plain (`[0]`) and a streaming (`[1]`) copy per size class, in
/// nanoseconds per KiB (0: none yet); and the copies of each class.
static COST: [[AtomicU64; CLASSES]; 2] = [const { [const { AtomicU64::new(0) }; CLASSES] }; 2];
static TURN: [AtomicU32; CLASSES] = [const { AtomicU32::new(0) }; CLASSES];

/// The size class of an `n`-byte copy (`n >= STREAM_MIN`).
fn class(n: usize) -> usize {
    ((n / STREAM_MIN).ilog2() as usize).min(CLASSES - 1)
}

/// Whether copy number `turn` of a class streams, from the last costs (ns per KiB, 0: not
/// measured yet) of a `plain` and a `stream` copy: a way not measured yet first (plain
/// first), then streaming while plain costs more than [`FAR_RATIO`] times as much, except
/// every [`EXPLORE`]th copy, which goes the other way.
fn streams(plain: u64, stream: u64, turn: u32) -> bool {
    if plain == 0 || stream == 0 {
        return plain != 0;
    }
    let far = plain > FAR_RATIO * stream;
    far != (turn % EXPLORE == EXPLORE - 1)
}

/// Copy `n` bytes from `src` to `dst` (as [`std::ptr::copy_nonoverlapping`]). From
/// [`STREAM_MIN`] bytes on, on `x86_64`, timed, and either plainly or with non-temporal
/// stores for the whole 64-byte lines of `dst` followed by a store fence, whichever
/// [`streams`] says from the costs measured (so a `Release` store after this call orders
/// the copy before it either way: non-temporal stores are not ordered by `Release`
/// alone). Streaming pays when the placement is far (see the module's measurements).
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]: `src` readable and `dst` writable for `n` bytes,
/// not overlapping.
pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n >= STREAM_MIN {
        let c = class(n);
        let turn = TURN[c].fetch_add(1, Ordering::Relaxed);
        let way = usize::from(streams(
            COST[0][c].load(Ordering::Relaxed),
            COST[1][c].load(Ordering::Relaxed),
            turn,
        ));
        let t = Instant::now();
        if way == 1 {
            // SAFETY: caller contract.
            unsafe { copy_x86_64(src, dst, n) };
        } else {
            // SAFETY: caller contract.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        }
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let per_kib = (ns.saturating_mul(1024) / n as u64).max(1);
        COST[way][c].store(per_kib, Ordering::Relaxed);
        return;
    }
    // SAFETY: caller contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

/// Copy `n` bytes from `src` to `dst` with non-temporal stores for the whole 64-byte
/// lines of `dst` (on `x86_64`; elsewhere a plain copy), then a store fence.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`].
pub(super) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: caller contract.
    unsafe {
        copy_x86_64(src, dst, n);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: caller contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, n);
    }
}

/// [`copy`] by SSE2 non-temporal stores (every `x86_64` processor has SSE2).
///
/// # Safety
/// As [`copy`].
#[cfg(target_arch = "x86_64")]
unsafe fn copy_x86_64(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LINE: usize = 64;
    let head = dst.align_offset(LINE).min(n);
    let lines = (n - head) / LINE;
    let body = lines * LINE;
    // SAFETY: the first `head` bytes of both (caller contract, `head <= n`).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    for i in 0..lines {
        let at = head + i * LINE;
        for j in 0..LINE / 16 {
            // SAFETY: bytes `at + 16 j .. at + 16 (j + 1)` lie below `head + body <= n`
            // (caller contract); the load is unaligned, the store's address is 16-aligned
            // (`dst + head` is 64-aligned, `at - head` a multiple of 64).
            unsafe {
                let v = _mm_loadu_si128(src.add(at + 16 * j).cast::<__m128i>());
                _mm_stream_si128(dst.add(at + 16 * j).cast::<__m128i>(), v);
            }
        }
    }
    let done = head + body;
    // SAFETY: the remaining `n - done` bytes of both (caller contract).
    unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n - done) };
    // SAFETY: a fence, no memory access: the non-temporal stores above become visible
    // before any later store (the progress word the readers acquire).
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain first, then one streaming copy, then the cheaper way by the ratio, the other
    /// way every `EXPLORE`th copy; size classes by powers of two.
    #[test]
    fn chooses_by_measured_cost() {
        assert!(!streams(0, 0, 0));
        assert!(streams(100, 0, 1));
        assert!(!streams(0, 40, 1));
        assert!(streams(440, 40, 0), "far: plain 11 times slower");
        assert!(!streams(80, 40, 0), "near: plain 2 times slower");
        assert!(!streams(440, 40, EXPLORE - 1), "far, exploring plain");
        assert!(streams(80, 40, EXPLORE - 1), "near, exploring streaming");
        assert!(streams(440, 40, EXPLORE), "far again after exploring");
        assert_eq!(class(STREAM_MIN), 0);
        assert_eq!(class(2 * STREAM_MIN - 1), 0);
        assert_eq!(class(1 << 20), 5);
        assert_eq!(class(usize::MAX), CLASSES - 1);
    }

    /// The streaming copy's fence: a reader that acquires the writer's `Release` store
    /// made after [`copy_x86_64`] sees every byte of that copy. Non-temporal stores are not
    /// ordered with later stores, so without the fence the flag may become visible while
    /// some lines still hold the last round's bytes (measured without it in a standalone
    /// copy of this loop, 2 threads on the 2 vCPUs: 4 KiB, 27 % of 200000 rounds saw a
    /// stale line; 64 KiB, 36 % of 20000). Hardware timing, not a schedule the test can
    /// force: with the threads on one CPU (a context switch drains the stores) it cannot
    /// fail, hence many rounds; the reader checks the lines last written first.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn streamed_copy_is_visible_at_the_release() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        const N: usize = 8 * 1024;
        const ROUNDS: usize = 20_000;
        // Words with interior mutability: the writer stores into them through a raw
        // pointer, the reader loads them.
        let dst: Arc<Vec<AtomicU64>> = Arc::new((0..N / 8).map(|_| AtomicU64::new(0)).collect());
        let flag = Arc::new(AtomicUsize::new(0));
        let ack = Arc::new(AtomicUsize::new(0));
        // Spin on `w` until it reaches `v`, yielding now and then (both threads may share
        // a CPU).
        let wait = |w: &AtomicUsize, v: usize| {
            let mut spins = 0u32;
            while w.load(Ordering::Acquire) != v {
                spins = spins.wrapping_add(1);
                if spins % 1024 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        };
        let writer = {
            let (dst, flag, ack) = (Arc::clone(&dst), Arc::clone(&flag), Arc::clone(&ack));
            std::thread::spawn(move || {
                let p = dst.as_ptr().cast::<u8>().cast_mut();
                let mut src = vec![0u8; N];
                for i in 1..=ROUNDS {
                    wait(&ack, i - 1);
                    src.fill(i as u8);
                    // SAFETY: `dst` holds `N` bytes of atomics (interior mutability, so
                    // they may be written through this pointer), read by the other thread
                    // only between our `flag` store and its `ack` store (waited for above);
                    // `src` is a distinct vector of `N` bytes.
                    unsafe { copy_x86_64(src.as_ptr(), p, N) };
                    flag.store(i, Ordering::Release);
                }
            })
        };
        let mut stale = 0usize;
        for i in 1..=ROUNDS {
            wait(&flag, i);
            let want = u64::from_ne_bytes([i as u8; 8]);
            for w in (0..N / 8).rev().step_by(8) {
                if dst[w].load(Ordering::Relaxed) != want {
                    stale += 1;
                    break;
                }
            }
            ack.store(i, Ordering::Release);
        }
        writer.join().unwrap();
        assert_eq!(
            stale, 0,
            "rounds of {ROUNDS} with a stale line after the release"
        );
    }

    /// Every length and misalignment of source and destination around the threshold and
    /// the line boundaries copies exactly the bytes asked, and nothing beyond: through
    /// [`copy`] (whichever way it takes) and the streaming copy itself.
    #[test]
    fn copies_exactly() {
        let src: Vec<u8> = (0..STREAM_MIN * 2 + 256)
            .map(|i| (i * 7 + 3) as u8)
            .collect();
        for n in [
            0,
            1,
            63,
            64,
            65,
            STREAM_MIN - 1,
            STREAM_MIN,
            STREAM_MIN + 1,
            STREAM_MIN + 77,
        ] {
            for (so, d_off) in [(0, 0), (1, 0), (0, 1), (13, 50), (64, 63)] {
                for way in 0..3 {
                    let mut dst = vec![0xAAu8; n + 256];
                    let (s, d) = (src[so..].as_ptr(), dst[d_off..].as_mut_ptr());
                    // SAFETY: `src[so..so + n]` and `dst[d_off..d_off + n]` are in bounds
                    // (`so + n <= 64 + STREAM_MIN + 77 < src.len()`, `d_off + n <
                    // dst.len()`), distinct vectors.
                    unsafe {
                        match way {
                            0 => copy(s, d, n),
                            #[cfg(target_arch = "x86_64")]
                            1 => copy_x86_64(s, d, n),
                            _ => copy(s, d, n),
                        }
                    }
                    let at = format!("n {n} so {so} do {d_off} way {way}");
                    assert_eq!(&dst[d_off..d_off + n], &src[so..so + n], "{at}");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xAA), "before, {at}");
                    assert!(dst[d_off + n..].iter().all(|&b| b == 0xAA), "after, {at}");
                }
            }
        }
    }
}
