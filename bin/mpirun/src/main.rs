//! `mpirun` / `mpiexec`: launch an MPI job (see `oxmpi_runtime`).

fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // The MPI library's parameters are validated here too, so a bad value, an unknown
    // component or a bad interface list stops the launch with one line.
    let code = oxmpi_runtime::main_with_checks(
        args,
        &[&oxmpi_engine::PROVIDER, &oxmpi_coll::PROVIDER],
        &[oxmpi_engine::check_params],
    );
    std::process::exit(code);
}
