// MPI cannot be finalized while a scoped request of the universe may still be pending.
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let mut got = [0u8; 4];
    let buf = &mut got[..];
    oxmpi::request::scope(move |s| -> oxmpi::Result<()> {
        let world = universe.world();
        let r = world.irecv_scoped(s, buf, 0, 0)?;
        drop(universe);
        r.wait()?;
        Ok(())
    })?;
    Ok(())
}
