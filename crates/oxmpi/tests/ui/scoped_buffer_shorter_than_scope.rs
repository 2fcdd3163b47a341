// A buffer must outlive the whole scope: even a request that is leaked keeps it borrowed.
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    oxmpi::request::scope(|s| -> oxmpi::Result<()> {
        let mut local = [0u64; 2];
        let r = world.irecv_scoped(s, &mut local[..], 0, 0)?;
        std::mem::forget(r);
        Ok(())
    })?;
    Ok(())
}
