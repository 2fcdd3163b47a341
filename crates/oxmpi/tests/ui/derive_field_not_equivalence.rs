use oxmpi::Equivalence;

#[derive(Clone, Copy)]
struct Opaque(u8);

#[derive(Equivalence, Clone, Copy)]
#[repr(C)]
struct HasPointer {
    a: i32,
    p: Opaque,
}

fn main() {}
