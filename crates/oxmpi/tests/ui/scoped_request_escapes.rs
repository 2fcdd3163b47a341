// A scoped request cannot leave its scope.
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    let data = [1u8; 8];
    let escaped = oxmpi::request::scope(|s| world.isend_scoped(s, &data[..], 0, 0));
    escaped?.wait()?;
    Ok(())
}
