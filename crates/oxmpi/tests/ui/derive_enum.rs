use oxmpi::Equivalence;

#[derive(Equivalence, Clone, Copy)]
#[repr(C)]
enum Color {
    Red,
    Green,
}

fn main() {}
