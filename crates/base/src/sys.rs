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

/// One IPv4 address of an interface as `getifaddrs(3)` lists it.
pub(crate) struct RawIface {
    /// Interface name.
    pub name: String,
    /// Its address.
    pub addr: std::net::Ipv4Addr,
    /// Its netmask (`0.0.0.0` if the kernel gave none).
    pub mask: std::net::Ipv4Addr,
    /// `IFF_UP` and `IFF_RUNNING` are set.
    pub up: bool,
    /// `IFF_LOOPBACK` is set.
    pub loopback: bool,
}

/// The IPv4 addresses of this host's interfaces, in the system's order (empty if they cannot
/// be listed).
pub(crate) fn ipv4_interfaces() -> Vec<RawIface> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` on success; freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let v4 = |sa: *const libc::sockaddr| -> Option<std::net::Ipv4Addr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: a non-null sockaddr of the list; the family is checked before the cast.
        if i32::from(unsafe { (*sa).sa_family }) != libc::AF_INET {
            return None;
        }
        // SAFETY: AF_INET addresses are sockaddr_in.
        let sin = unsafe { &*sa.cast::<libc::sockaddr_in>() };
        Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
    };
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        // SAFETY: p is a node of the list returned by getifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        let Some(addr) = v4(ifa.ifa_addr) else {
            continue;
        };
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        let flags = ifa.ifa_flags;
        let set = |f: i32| flags & f as u32 != 0;
        out.push(RawIface {
            name: name.into_owned(),
            addr,
            mask: v4(ifa.ifa_netmask).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
            up: set(libc::IFF_UP) && set(libc::IFF_RUNNING),
            loopback: set(libc::IFF_LOOPBACK),
        });
    }
    // SAFETY: list came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// Sets an integer socket option (`setsockopt(fd, level, name, &value)`).
pub(crate) fn set_int_sockopt(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: the option value is a valid c_int of the size passed; the kernel checks `fd`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `SOL_SOCKET`/`SO_KEEPALIVE` and the `IPPROTO_TCP` options that tune it and bound
/// unacknowledged data (`TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`, `TCP_USER_TIMEOUT`).
pub(crate) const KEEPALIVE: (libc::c_int, libc::c_int) = (libc::SOL_SOCKET, libc::SO_KEEPALIVE);
/// See [`KEEPALIVE`].
pub(crate) const KEEPIDLE: (libc::c_int, libc::c_int) = (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE);
/// See [`KEEPALIVE`].
pub(crate) const KEEPINTVL: (libc::c_int, libc::c_int) = (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL);
/// See [`KEEPALIVE`].
pub(crate) const KEEPCNT: (libc::c_int, libc::c_int) = (libc::IPPROTO_TCP, libc::TCP_KEEPCNT);
/// See [`KEEPALIVE`].
pub(crate) const USER_TIMEOUT: (libc::c_int, libc::c_int) =
    (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT);

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
