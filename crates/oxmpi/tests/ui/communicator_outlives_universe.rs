// A communicator cannot be used after its universe is dropped (MPI finalized).
fn main() -> oxmpi::Result<()> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    drop(universe);
    world.send(&[1u8][..], 0, 0)?;
    Ok(())
}
