// A send buffer cannot be freed (or modified) while a scoped send may still read it.
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    let data = vec![1u8, 2, 3];
    oxmpi::request::scope(|s| -> oxmpi::Result<()> {
        let r = world.isend_scoped(s, &data[..], 0, 0)?;
        drop(data);
        r.wait()?;
        Ok(())
    })?;
    Ok(())
}
