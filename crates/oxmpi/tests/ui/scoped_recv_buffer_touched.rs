// A receive buffer cannot be read or written while a scoped receive may still write it.
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    let mut got = [0i32; 4];
    oxmpi::request::scope(|s| -> oxmpi::Result<()> {
        let r = world.irecv_scoped(s, &mut got[..], 0, 0)?;
        got[0] = 1;
        r.wait()?;
        Ok(())
    })?;
    Ok(())
}
