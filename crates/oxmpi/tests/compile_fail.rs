//! Compile-fail tests: the derive's layout rules and the scoped-request borrow rules are enforced
//! by the compiler. Each `tests/ui/*.rs` must fail to compile with the error in its `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
