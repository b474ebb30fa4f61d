//! A network namespace of our own with only loopback: Cluster API's webhook servers and CAPD's
//! in-memory API servers listen on every interface (upstream has no flag for the host, and CAPD's
//! debug port is a fixed 19000), so a test that runs them moves itself first into a namespace where
//! "every interface" is 127.0.0.1, reachable from nowhere else and free of other runs' ports.

/// Moves this process into a new network namespace and brings its loopback up. Call it before
/// any thread is started (a namespace is per thread; children inherit the caller's). Needs
/// CAP_SYS_ADMIN (root in CI's container); the error says why it could not.
#[cfg(target_os = "linux")]
pub fn isolate() -> Result<(), String> {
    // SAFETY: unshare(2) changes only this thread's namespace; checked for failure.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!("unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a datagram socket for the interface ioctls, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data; the name is NUL-terminated within IFNAMSIZ; the ioctls read
    // and write only that struct.
    let result = unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) != 0 {
            Err(format!("SIOCGIFFLAGS lo: {}", std::io::Error::last_os_error()))
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) != 0 {
                Err(format!("SIOCSIFFLAGS lo up: {}", std::io::Error::last_os_error()))
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    result
}

#[cfg(not(target_os = "linux"))]
pub fn isolate() -> Result<(), String> {
    Err("network namespaces are Linux's".into())
}
