//! `mpirun` / `mpiexec`: launch an MPI job (see `oxmpi_runtime`).

fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = oxmpi_runtime::main_with_args(args);
    std::process::exit(code);
}
