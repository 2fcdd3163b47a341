use oxmpi::Equivalence;

#[derive(Equivalence, Clone, Copy)]
struct NoRepr {
    a: i32,
    b: f64,
}

fn main() {}
