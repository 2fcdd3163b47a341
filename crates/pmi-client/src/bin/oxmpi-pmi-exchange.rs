//! `oxmpi-pmi-exchange`, a PMI smoke program: run it under any PMI launcher (`mpiexec.hydra -n 4`, `srun --mpi=pmi2`,
//! oxmpi's `mpirun`). Every rank puts a short value and a multi-chunk binary blob, fences,
//! reads every other rank's values, checks them, fences again and finalizes. Prints one
//! `pmi_exchange OK rank R of N ...` line per rank; exits 1 (after asking the process
//! manager to abort) on any mismatch.

use oxmpi_pmi::{Error, Pmi};

fn blob(rank: u32) -> Vec<u8> {
    (0..1500u32)
        .map(|i| (i.wrapping_mul(31) ^ rank.wrapping_mul(7)) as u8)
        .collect()
}

fn run(pmi: &mut Pmi) -> Result<String, String> {
    let e = |e: Error| e.to_string();
    let (rank, size) = (pmi.rank(), pmi.size());
    pmi.put(
        &format!("addr-{rank}"),
        &format!("tcp://10.0.0.{}:{}", rank + 1, 5000 + rank),
    )
    .map_err(e)?;
    pmi.put_bytes(&format!("blob-{rank}"), &blob(rank))
        .map_err(e)?;
    pmi.fence().map_err(e)?;
    for p in 0..size {
        let v = pmi.get(Some(p), &format!("addr-{p}")).map_err(e)?;
        let want = format!("tcp://10.0.0.{}:{}", p + 1, 5000 + p);
        if v != want {
            return Err(format!("addr-{p}: got {v:?}, want {want:?}"));
        }
        if pmi.get_bytes(Some(p), &format!("blob-{p}")).map_err(e)? != blob(p) {
            return Err(format!("blob-{p} differs"));
        }
    }
    match pmi.get(None, "no-such-key") {
        Err(Error::NotFound { .. }) => {}
        other => return Err(format!("missing key gave {other:?}")),
    }
    let nodes = pmi.node_of_ranks().map_err(e)?;
    if let Some(n) = &nodes {
        if n.len() != size as usize {
            return Err(format!("process mapping covers {} ranks", n.len()));
        }
    }
    pmi.fence().map_err(e)?;
    Ok(format!(
        "pmi_exchange OK rank {rank} of {size} (version {:?}, kvs {}, appnum {}, nodes {:?})",
        pmi.version(),
        pmi.kvsname(),
        pmi.appnum(),
        nodes
    ))
}

fn main() {
    let mut pmi = match Pmi::init() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pmi_exchange: init failed: {e}");
            std::process::exit(1);
        }
    };
    match run(&mut pmi) {
        Ok(line) => {
            if let Err(e) = pmi.finalize() {
                eprintln!("pmi_exchange: finalize failed: {e}");
                std::process::exit(1);
            }
            println!("{line}");
        }
        Err(msg) => {
            eprintln!("pmi_exchange: rank {}: {msg}", pmi.rank());
            let _ = pmi.abort(1, &msg);
            std::process::exit(1);
        }
    }
}
