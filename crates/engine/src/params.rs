//! Engine parameters, read from the environment (`OXMPI_MCA_<name>`, then `OMPI_MCA_<name>`)
//! until the MCA registry of `oxmpi-base` is wired in.

/// Raw value of parameter `name`.
pub fn raw(name: &str) -> Option<String> {
    std::env::var(format!("OXMPI_MCA_{name}"))
        .or_else(|_| std::env::var(format!("OMPI_MCA_{name}")))
        .ok()
}

/// Size/int parameter with default; accepts `k`/`m` suffixes (KiB, MiB).
pub fn size(name: &str, default: usize) -> usize {
    raw(name).and_then(|v| parse_size(&v)).unwrap_or(default)
}

/// Boolean parameter (`1`, `true`, `yes`, `on`).
pub fn flag(name: &str) -> bool {
    raw(name).is_some_and(|v| parse_bool(&v))
}

fn parse_bool(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

fn parse_size(v: &str) -> Option<usize> {
    let v = v.trim().to_ascii_lowercase();
    let (num, mul) = match v.strip_suffix('k') {
        Some(n) => (n, 1024),
        None => match v.strip_suffix('m') {
            Some(n) => (n, 1024 * 1024),
            None => (v.as_str(), 1),
        },
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mul)
}

/// Verbose level of a framework (`<fw>_base_verbose`).
pub fn verbose_level(framework: &str) -> i32 {
    raw(&format!("{framework}_base_verbose"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Prints a verbose line `[host:pid] framework: msg` to stderr if the level is enabled.
pub fn verbose(framework: &str, level: i32, msg: impl FnOnce() -> String) {
    if verbose_level(framework) >= level {
        eprintln!(
            "[{}:{}] {}: {}",
            crate::sys::hostname(),
            crate::sys::getpid(),
            framework,
            msg()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_and_bools() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("32k"), Some(32768));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("x"), None);
        assert!(parse_bool("1") && parse_bool("Yes") && !parse_bool("0") && !parse_bool(""));
    }
}
