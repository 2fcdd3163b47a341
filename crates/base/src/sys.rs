//! The base crate's OS layer: its only system calls (the host name and syslog). The rest of
//! the crate names no `libc` function and has no `unsafe`.

/// This host's name as the kernel reports it (`None` if `gethostname` fails).
pub(crate) fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: buf is a valid, writable buffer of buf.len() bytes; gethostname writes at
    // most that many bytes and we only read up to the first NUL below.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The syslog priorities the output framework uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyslogPriority {
    /// `LOG_ERR`.
    Error,
    /// `LOG_WARNING`.
    Warning,
    /// `LOG_INFO`.
    Info,
}

/// Opens the connection to syslog as `oxmpi` (with the pid, facility `LOG_USER`).
pub(crate) fn syslog_open() {
    // SAFETY: the ident is a 'static NUL-terminated string, as openlog requires (it keeps
    // the pointer).
    unsafe { libc::openlog(c"oxmpi".as_ptr(), libc::LOG_PID, libc::LOG_USER) };
}

/// Sends one line to syslog (NUL bytes become spaces).
pub(crate) fn syslog(priority: SyslogPriority, line: &str) {
    let pri = match priority {
        SyslogPriority::Error => libc::LOG_ERR,
        SyslogPriority::Warning => libc::LOG_WARNING,
        SyslogPriority::Info => libc::LOG_INFO,
    };
    let Ok(c) = std::ffi::CString::new(line.replace('\0', " ")) else {
        return;
    };
    // SAFETY: both the "%s" format and `c` are valid NUL-terminated strings; the format
    // consumes exactly one string argument.
    unsafe { libc::syslog(pri, c"%s".as_ptr(), c.as_ptr()) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostname_is_the_kernels() {
        let name = super::hostname().expect("gethostname works here");
        assert!(!name.is_empty());
        assert!(!name.contains('\0'));
        let uts = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(name, uts.trim_end());
    }
}
