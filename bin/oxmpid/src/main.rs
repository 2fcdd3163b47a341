//! `oxmpid`: the node daemon that `mpirun`'s launch agents start on other nodes (see
//! `oxmpi_runtime::remote`). Not meant to be run by hand.

fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = oxmpi_runtime::remote::oxmpid_main(args);
    std::process::exit(code);
}
