//! The base crate's OS layer: its only system calls (the host name, syslog, interfaces and
//! sockets). The rest of the crate names no `libc` function and has no `unsafe`.

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

/// A `sockaddr_in` for `ip:port`.
fn sockaddr_v4(ip: std::net::Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A TCP connection to `to` from our address `from` (the port the kernel picks), given up
/// after `timeout`: `socket`, `bind`, a non-blocking `connect` and `poll`; the stream is
/// blocking again when returned.
pub(crate) fn connect_from(
    from: std::net::Ipv4Addr,
    to: std::net::SocketAddrV4,
    timeout: std::time::Duration,
) -> std::io::Result<std::net::TcpStream> {
    use std::io::{Error, ErrorKind};
    use std::os::fd::{FromRawFd, OwnedFd};
    let ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: socket(2) takes no pointers; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, ty, 0) };
    if fd < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: `fd` is a new socket that nothing else owns; the OwnedFd closes it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let local = sockaddr_v4(from, 0);
    // SAFETY: `local` is a valid sockaddr_in of `len` bytes.
    if unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) } != 0 {
        return Err(Error::last_os_error());
    }
    let remote = sockaddr_v4(*to.ip(), to.port());
    // SAFETY: `remote` is a valid sockaddr_in of `len` bytes.
    if unsafe { libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) } != 0 {
        let e = Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::new(ErrorKind::TimedOut, "connection timed out"));
            }
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
            // SAFETY: `p` is one valid pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc > 0 {
                break;
            }
            if rc < 0 {
                let e = Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        let mut err: libc::c_int = 0;
        let mut elen = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` and `elen` are valid for the kernel to write an int and its size.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut elen,
            )
        };
        if rc != 0 {
            return Err(Error::last_os_error());
        }
        if err != 0 {
            return Err(Error::from_raw_os_error(err));
        }
    }
    let s = std::net::TcpStream::from(sock);
    s.set_nonblocking(false)?;
    Ok(s)
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
