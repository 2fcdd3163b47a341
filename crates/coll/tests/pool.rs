//! The buffer pool's guard: a `Pooled` buffer goes back to the pool however its owner
//! returns. Its own test binary, so no other test takes buffers from the pool meanwhile.

use oxmpi_coll::{pooled, Pooled};

/// Fills a pooled buffer, then fails half way, as a collective that errors out does.
fn fails_after_filling(n: usize) -> Result<(), &'static str> {
    let mut b = Pooled::new(n);
    b.fill(7);
    if b.len() == n {
        return Err("failed");
    }
    Ok(())
}

#[test]
fn a_pooled_buffer_goes_back_on_every_return_path() {
    let n = 1 << 20;
    // The first buffer of this size is fresh; remember where it lives.
    let first = Pooled::new(n);
    let at = first.as_ptr();
    drop(first);
    // Dropped: the next request of the size gets the same memory back.
    let again = Pooled::new(n);
    assert_eq!(again.as_ptr(), at, "a dropped Pooled was not given back");
    let kept = again.as_ptr();
    drop(again);
    // An early return through `?`-style error paths gives it back too.
    assert_eq!(fails_after_filling(n), Err("failed"));
    let v = pooled(n);
    assert_eq!(
        v.as_ptr(),
        kept,
        "a Pooled dropped on an error path was not given back"
    );
    assert_eq!(v.len(), n);
    // Adopting a vector that the pool handed out keeps the same buffer.
    let adopted = Pooled::from_vec(v);
    assert_eq!(adopted.as_ptr(), kept);
}
