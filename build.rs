//! Link flags of the `clusterstack` binary.
//!
//! On GNU/Linux the binary's 69,000 relative relocations are packed as `DT_RELR` (a bitmap of
//! a few kilobytes) instead of 1.6 MiB of `RELA` entries that the dynamic loader reads at every
//! start: the binary starts faster and 1.6 MiB smaller, which counts for a command run per
//! chart. glibc reads `DT_RELR` from 2.36 on, and the linker marks the binary as needing it,
//! so the flag is given only when building on such a glibc for the same machine (a cross build
//! keeps the classic form).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if gnu_linux && var("TARGET") == var("HOST") && host_glibc_at_least(2, 36) {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn host_glibc_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: `gnu_get_libc_version` returns a static NUL-terminated string ("2.36").
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let mut parts = version.to_str().unwrap_or("").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn host_glibc_at_least(_major: u32, _minor: u32) -> bool {
    false
}
